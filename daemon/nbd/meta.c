/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * meta.c - metadata contexts and their queries: see meta.h.
 */
#include <string.h>

#include "buf.h"
#include "meta.h"
#include "nbd-proto.h"

static const struct {
	const char *ns;   /* namespace, without the colon */
	const char *leaf; /* leaf name */
} meta_contexts[META_N_CONTEXTS] = {
	[META_BASE_ALLOCATION] = { "base", "allocation" },
	[META_WBD_DIRTY] = { "wbd", "dirty" },
};

const char *
meta_context_name(enum meta_context m)
{
	switch (m) {
	case META_BASE_ALLOCATION:
		return "base:allocation";
	case META_WBD_DIRTY:
		return "wbd:dirty";
	default:
		return "unknown";
	}
}

static bool
meta_equal(const uint8_t *p, size_t n, const char *s)
{
	return n == strlen(s) && memcmp(p, s, n) == 0;
}

/* The contexts query Q (N bytes) selects; -1 if it has no namespace. */
static int
meta_match(const uint8_t *q, uint32_t n, bool list)
{
	const uint8_t *colon = memchr(q, ':', n);
	unsigned sel = 0;

	if (!colon || colon == q)
		return -1;
	size_t nslen = (size_t)(colon - q), leaflen = n - nslen - 1;
	for (unsigned m = 0; m < META_N_CONTEXTS; m++) {
		if (!meta_equal(q, nslen, meta_contexts[m].ns))
			continue;
		/* An empty leaf name: the namespace's contexts, in a LIST. */
		bool hit = list;
		if (leaflen > 0)
			hit = meta_equal(colon + 1, leaflen,
			    meta_contexts[m].leaf);
		if (hit)
			sel |= 1u << m;
	}
	return (int)sel;
}

uint32_t
meta_parse(const uint8_t *data, uint32_t len, bool list,
    struct meta_request *mr, const char **why)
{
	memset(mr, 0, sizeof *mr);
	if (len < 8) {
		*why = "option too short";
		return NBD_REP_ERR_INVALID;
	}
	uint32_t namelen = get_u32(data);
	if (namelen > len - 8) {
		*why = "export name length exceeds the option";
		return NBD_REP_ERR_INVALID;
	}
	mr->name = data + 4;
	mr->namelen = namelen;

	const uint8_t *p = data + 4 + namelen;
	uint32_t nq = get_u32(p), left = len - 8 - namelen;
	p += 4;
	/* The lengths first: a query count that does not fit is invalid
	 * even when it is also too large. */
	for (uint32_t i = 0; i < nq; i++) {
		if (left < 4 || get_u32(p) > left - 4) {
			*why = "query length exceeds the option";
			return NBD_REP_ERR_INVALID;
		}
		left -= 4 + get_u32(p);
		p += 4 + get_u32(p);
	}
	if (left != 0) {
		*why = "option longer than its queries";
		return NBD_REP_ERR_INVALID;
	}
	if (nq > META_MAX_QUERIES) {
		*why = "too many queries";
		return NBD_REP_ERR_TOO_BIG;
	}

	if (nq == 0 && list)
		mr->selected = META_ALL;
	p = data + 8 + namelen;
	for (uint32_t i = 0; i < nq; i++) {
		uint32_t n = get_u32(p);
		int sel = meta_match(p + 4, n, list);
		if (memchr(p + 4, '\0', n)) {
			*why = "query contains a NUL byte";
			return NBD_REP_ERR_INVALID;
		}
		if (sel < 0) {
			*why = "query without a namespace (\"NAMESPACE:...\")";
			return NBD_REP_ERR_INVALID;
		}
		mr->selected |= (unsigned)sel;
		p += 4 + n;
	}
	return 0;
}
