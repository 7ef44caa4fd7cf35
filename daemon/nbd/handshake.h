/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * handshake.h - the NBD fixed-newstyle handshake: option haggling.
 *
 * Pure protocol logic: it consumes one option at a time and appends the
 * replies to a buffer; the connection code does the socket I/O.  It knows
 * exports only through the callbacks in struct hs_ctx, so that it can be
 * unit-tested without a daemon.  Runs on the connection's I/O thread.
 */
#ifndef WBD_HANDSHAKE_H
#define WBD_HANDSHAKE_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"

/* Option payloads longer than this are not buffered. */
#define HS_MAX_OPTION_BYTES     (64u << 10)
/* ...and longer than this are not even read: the client is cut off. */
#define HS_MAX_DISCARD_BYTES    (16u << 20)
#define HS_MAX_NAME_BYTES       4096

#define HS_MIN_BLOCK_BYTES      1u
#define HS_PREF_BLOCK_BYTES     4096u

/* What the handshake needs to know of an export. */
struct hs_export {
	const char *name;
	const char *description;        /* may be NULL */
	uint64_t size_bytes;
	uint16_t tflags;
	uint32_t max_block_bytes;
	bool tls_only; /* refused until TLS is up */
};

struct hs_ctx {
	/* Exports by name ("" is the default export), and by index. */
	const struct hs_export *(*lookup)(void *arg, const char *name);
	const struct hs_export *(*nth)(void *arg, size_t i);
	/* May this client open E?  LISTING: only asked to decide whether LIST
	 * shows E (nothing to log).  NULL: everyone may open everything. */
	bool (*may_open)(void *arg, const struct hs_export *e, bool listing);
	/* No export NAME ("" the default) is served: is it configured, and
	 * waiting for its remote NBD server to answer?  The callee logs the
	 * request.  NULL: no export ever waits. */
	bool (*waiting)(void *arg, const char *name);
	void *arg;

	/* TLS, set for the whole connection before the first option. */
	bool tls_offered;  /* STARTTLS is answered */
	bool tls_required; /* nothing but STARTTLS and ABORT
	                                   before TLS is up */
	bool tls_active;   /* TLS is up (set by the caller) */

	/* Negotiated so far. */
	bool fixed_newstyle;
	bool no_zeroes;
	bool structured;
	/* GO asked for NBD_INFO_BLOCK_SIZE: held to the maximum. */
	bool block_sizes;
	const struct hs_export *chosen; /* set when HS_TRANSMISSION */
	char *chosen_name;              /* the name as the client gave it */
	/* NBD_OPT_SET_META_CONTEXT: the contexts selected (meta.h) and the
	 * export they were selected for; none if another is chosen. */
	unsigned meta;
	const struct hs_export *meta_export;
};

enum hs_action {
	HS_CONTINUE,            /* read the next option */
	HS_TRANSMISSION,        /* send OUT, then enter transmission */
	HS_CLOSE,               /* send OUT, then close */
	HS_STARTTLS,            /* send OUT, then the TLS handshake; set
	                           tls_active when it is done */
};

/* The server's greeting: magic, IHAVEOPT, handshake flags. */
void hs_greeting(struct buf *out);

/* The client's 32-bit flags; returns HS_CLOSE on unknown bits. */
enum hs_action hs_client_flags(struct hs_ctx *hs, uint32_t flags);

/* One complete option (header already parsed, DATA of LEN bytes). */
enum hs_action hs_option(struct hs_ctx *hs, uint32_t opt, const uint8_t *data,
    uint32_t len, struct buf *out);

/* An option reply carrying an error and a human-readable message. */
void hs_reply_error(struct buf *out, uint32_t opt, uint32_t err,
    const char *msg);

const char *hs_option_name(uint32_t opt);

void hs_ctx_clear(struct hs_ctx *hs);

#endif
