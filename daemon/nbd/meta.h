/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * meta.h - the metadata contexts wbd serves (NBD "Metadata querying"), and
 * the queries of NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT
 * that select them.  Pure: the handshake asks, the export answers
 * NBD_CMD_BLOCK_STATUS for what was selected.  Any thread.
 *
 *   base:allocation  holes and zeroes (the spec's base: namespace)
 *   wbd:dirty        what is dirty in the cache, and what is being written
 *                    back (docs/block-status.md)
 *
 * A context keeps one id on every connection (meta_context_id), so the id
 * an earlier SET_META_CONTEXT returned stays right after a later one.
 */
#ifndef WBD_META_H
#define WBD_META_H

#include <stdbool.h>
#include <stdint.h>

enum meta_context {
	META_BASE_ALLOCATION,
	META_WBD_DIRTY,
	META_N_CONTEXTS,
};

/* A selection: bit (1 << enum meta_context) per context. */
#define META_ALL ((1u << META_N_CONTEXTS) - 1)

/* More queries than this in one option: NBD_REP_ERR_TOO_BIG. */
#define META_MAX_QUERIES 256

/* wbd:dirty's flags (docs/block-status.md). */
#define META_DIRTY_STATE_DIRTY (1u << 0)     /* not yet on the backing */
#define META_DIRTY_STATE_WRITEBACK (1u << 1) /* being written back now */

const char *meta_context_name(enum meta_context m);

/* The context's id, the same on every connection: never 0. */
static inline uint32_t
meta_context_id(enum meta_context m)
{
	return (uint32_t)m + 1;
}

/* A LIST_META_CONTEXT or SET_META_CONTEXT option, parsed. */
struct meta_request {
	const uint8_t *name; /* the export name, not NUL-terminated */
	uint32_t namelen;
	unsigned selected; /* the contexts its queries select */
};

/*
 * Parse the data of NBD_OPT_LIST_META_CONTEXT (LIST) or
 * NBD_OPT_SET_META_CONTEXT into *MR.  Returns 0, or the NBD_REP_ERR_* to
 * refuse the option with and in *WHY a message for the client: INVALID if
 * the lengths do not add up or a query has no namespace or holds a NUL,
 * TOO_BIG for more than META_MAX_QUERIES queries.  The export name is not
 * looked at.  Queries of unknown namespaces and unknown leaf names select
 * nothing; an empty leaf name ("base:") selects the namespace's contexts
 * in a LIST and nothing in a SET; a LIST with no query selects all.
 */
uint32_t meta_parse(const uint8_t *data, uint32_t len, bool list,
    struct meta_request *mr, const char **why);

#endif
