/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * handshake.c - NBD option haggling (fixed newstyle).
 *
 * Each hs_option() call handles exactly one option and appends its complete
 * replies to OUT.  Errors in an option are answered with the NBD_REP_ERR_*
 * the protocol prescribes, carrying a message for the client's user; only a
 * failed NBD_OPT_EXPORT_NAME (which has no way to report errors) or ABORT
 * end the connection.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handshake.h"
#include "log.h"
#include "meta.h"
#include "nbd-proto.h"
#include "ratelimit.h"

/* Handshakes refused for what the client sent are logged at most once in
 * HS_REFUSE_LOG_NS, with a count of those not logged, so that a client
 * repeating them cannot flood the log (2,000 refused connections once
 * wrote 4,000 lines in 1.3 s). */
#define HS_REFUSE_LOG_NS (10ull * 1000000000ull)

static struct ratelimit hs_refuse_rl;

static void
hs_log_refusal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
hs_log_refusal(const char *fmt, ...)
{
	char msg[256];
	unsigned quiet;
	va_list ap;

	if (!ratelimit_due(&hs_refuse_rl, HS_REFUSE_LOG_NS, &quiet))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (quiet)
		log_warnx("%s (%u more refused handshakes not logged)", msg,
		    quiet);
	else
		log_warnx("%s", msg);
}

void
hs_greeting(struct buf *out)
{
	buf_put_u64(out, NBD_MAGIC);
	buf_put_u64(out, NBD_OPT_MAGIC);
	buf_put_u16(out, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
}

enum hs_action
hs_client_flags(struct hs_ctx *hs, uint32_t flags)
{
	if (flags & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)) {
		hs_log_refusal("handshake: unknown client flags 0x%x", flags);
		return HS_CLOSE;
	}
	hs->fixed_newstyle = flags & NBD_FLAG_C_FIXED_NEWSTYLE;
	hs->no_zeroes = flags & NBD_FLAG_C_NO_ZEROES;
	return HS_CONTINUE;
}

static void
hs_reply(struct buf *out, uint32_t opt, uint32_t type, const void *data,
    uint32_t len)
{
	buf_put_u64(out, NBD_REP_MAGIC);
	buf_put_u32(out, opt);
	buf_put_u32(out, type);
	buf_put_u32(out, len);
	buf_put(out, data, len);
}

void
hs_reply_error(struct buf *out, uint32_t opt, uint32_t err, const char *msg)
{
	hs_reply(out, opt, err, msg, msg ? (uint32_t)strlen(msg) : 0);
}

static void
hs_reply_info_export(struct buf *out, uint32_t opt, const struct hs_export *e)
{
	uint8_t d[12];

	put_u16(d, NBD_INFO_EXPORT);
	put_u64(d + 2, e->size_bytes);
	put_u16(d + 10, e->tflags);
	hs_reply(out, opt, NBD_REP_INFO, d, sizeof d);
}

static void
hs_reply_info_string(struct buf *out, uint32_t opt, uint16_t type,
    const char *s)
{
	size_t n = strlen(s);

	buf_put_u64(out, NBD_REP_MAGIC);
	buf_put_u32(out, opt);
	buf_put_u32(out, NBD_REP_INFO);
	buf_put_u32(out, (uint32_t)(2 + n));
	buf_put_u16(out, type);
	buf_put(out, s, n);
}

static void
hs_reply_info_block_size(struct buf *out, uint32_t opt,
    const struct hs_export *e)
{
	uint8_t d[14];

	put_u16(d, NBD_INFO_BLOCK_SIZE);
	put_u32(d + 2, HS_MIN_BLOCK_BYTES);
	put_u32(d + 6, HS_PREF_BLOCK_BYTES);
	put_u32(d + 10, e->max_block_bytes);
	hs_reply(out, opt, NBD_REP_INFO, d, sizeof d);
}

static bool
hs_may_open(struct hs_ctx *hs, const struct hs_export *e, bool listing)
{
	return !hs->may_open || hs->may_open(hs->arg, e, listing);
}

/* Copy a length-counted name out of an option; NULL if it holds a NUL. */
static char *
hs_dup_name(const uint8_t *p, uint32_t len)
{
	if (memchr(p, '\0', len))
		return NULL;
	char *s = malloc(len + 1);
	if (s) {
		memcpy(s, p, len);
		s[len] = '\0';
	}
	return s;
}

/* No export NAME is served: is it one waiting for its remote? */
static bool
hs_waiting(struct hs_ctx *hs, const char *name)
{
	return hs->waiting && hs->waiting(hs->arg, name);
}

static void
hs_choose(struct hs_ctx *hs, const struct hs_export *e, char *name)
{
	/* Contexts selected on another export do not apply to this one. */
	if (e != hs->meta_export)
		hs->meta = 0;
	hs->chosen = e;
	free(hs->chosen_name);
	hs->chosen_name = name;
}

static enum hs_action
hs_export_name(struct hs_ctx *hs, const uint8_t *data, uint32_t len,
    struct buf *out)
{
	char *name = len <= HS_MAX_NAME_BYTES ? hs_dup_name(data, len) : NULL;
	const struct hs_export *e = name ? hs->lookup(hs->arg, name) : NULL;

	if (!e) {
		/* NBD_OPT_EXPORT_NAME cannot report an error: hang up.  One
		 * that waits for its remote was logged by hs_waiting. */
		if (!name || !hs_waiting(hs, name))
			hs_log_refusal("handshake: EXPORT_NAME: unknown export "
				       "\"%.64s\"",
			    name ? name : "(invalid name)");
		free(name);
		return HS_CLOSE;
	}
	if (e->tls_only && !hs->tls_active) {
		hs_log_refusal(
		    "handshake: EXPORT_NAME: export \"%.64s\" requires "
		    "TLS; disconnecting",
		    name);
		free(name);
		return HS_CLOSE;
	}
	if (!hs_may_open(hs, e, false)) {
		/* Refused (and logged) by the allow list: no error reply
		 * exists either. */
		free(name);
		return HS_CLOSE;
	}
	hs_choose(hs, e, name);
	buf_put_u64(out, e->size_bytes);
	buf_put_u16(out, e->tflags);
	if (!hs->no_zeroes) {
		static const uint8_t zeroes[124];
		buf_put(out, zeroes, sizeof zeroes);
	}
	return HS_TRANSMISSION;
}

/*
 * The export an option names (NAMELEN bytes at P), and a copy of the name
 * in *NAMEP; NULL after replying with the error, if there is none.
 */
static const struct hs_export *
hs_find_export(struct hs_ctx *hs, uint32_t opt, const uint8_t *p,
    uint32_t namelen, char **namep, struct buf *out)
{
	*namep = NULL;
	if (namelen > HS_MAX_NAME_BYTES) {
		hs_reply_error(out, opt, NBD_REP_ERR_TOO_BIG,
		    "export name longer than 4096 bytes");
		return NULL;
	}
	char *name = hs_dup_name(p, namelen);
	if (!name) {
		hs_reply_error(out, opt, NBD_REP_ERR_INVALID,
		    "export name contains a NUL byte");
		return NULL;
	}
	const struct hs_export *e = hs->lookup(hs->arg, name);
	if (!e) {
		char msg[224] = "no default export: name one (NBD_OPT_LIST)";
		char what[80] = "the default export";
		if (*name)
			snprintf(what, sizeof what, "export \"%.64s\"", name);
		/* The spec's "not available" either way: an export that
		 * waits for its remote is told apart by the message. */
		if (hs_waiting(hs, name))
			snprintf(msg, sizeof msg,
			    "%s is configured, but its remote NBD server has "
			    "not answered yet; wbd keeps trying: try again "
			    "later",
			    what);
		else if (*name)
			snprintf(msg, sizeof msg, "unknown export \"%.64s\"",
			    name);
		log_debug("handshake: %s: %s", hs_option_name(opt), msg);
		hs_reply_error(out, opt, NBD_REP_ERR_UNKNOWN, msg);
		free(name);
		return NULL;
	}
	*namep = name;
	return e;
}

/* Reply the error if this client may not open E (TLS required and not
 * active, or its allow list): true if it may not (the reply written). */
static bool
hs_refused(struct hs_ctx *hs, uint32_t opt, const struct hs_export *e,
    const char *name, struct buf *out)
{
	char msg[160];

	if (e->tls_only && !hs->tls_active) {
		snprintf(msg, sizeof msg, "export \"%.64s\" requires TLS",
		    name);
		log_debug("handshake: %s: %s", hs_option_name(opt), msg);
		hs_reply_error(out, opt, NBD_REP_ERR_TLS_REQD, msg);
		return true;
	}
	if (!hs_may_open(hs, e, false)) {
		snprintf(msg, sizeof msg,
		    "export \"%.64s\" is not open to this client", name);
		hs_reply_error(out, opt, NBD_REP_ERR_POLICY, msg);
		return true;
	}
	return false;
}

static enum hs_action
hs_info_go(struct hs_ctx *hs, uint32_t opt, const uint8_t *data, uint32_t len,
    struct buf *out)
{
	if (len < 6) {
		hs_reply_error(out, opt, NBD_REP_ERR_INVALID,
		    "option too short");
		return HS_CONTINUE;
	}
	uint32_t namelen = get_u32(data);
	if (namelen > len - 6) {
		hs_reply_error(out, opt, NBD_REP_ERR_INVALID,
		    "export name length exceeds the option");
		return HS_CONTINUE;
	}
	uint16_t nreq = get_u16(data + 4 + namelen);
	if (len != 6 + namelen + 2u * nreq) {
		hs_reply_error(out, opt, NBD_REP_ERR_INVALID,
		    "option length does not match its information requests");
		return HS_CONTINUE;
	}
	char *name;
	const struct hs_export *e =
	    hs_find_export(hs, opt, data + 4, namelen, &name, out);
	if (!e)
		return HS_CONTINUE;
	if (hs_refused(hs, opt, e, name, out)) {
		free(name);
		return HS_CONTINUE;
	}

	bool want_name = false, want_desc = false, want_bs = false;
	for (uint16_t i = 0; i < nreq; i++) {
		uint16_t t = get_u16(data + 6 + namelen + 2u * i);
		if (t == NBD_INFO_NAME)
			want_name = true;
		else if (t == NBD_INFO_DESCRIPTION)
			want_desc = true;
		else if (t == NBD_INFO_BLOCK_SIZE)
			want_bs = true;
		/* EXPORT and BLOCK_SIZE are always sent; others ignored. */
	}

	hs_reply_info_export(out, opt, e);
	if (want_name)
		hs_reply_info_string(out, opt, NBD_INFO_NAME, e->name);
	if (want_desc && e->description)
		hs_reply_info_string(out, opt, NBD_INFO_DESCRIPTION,
		    e->description);
	hs_reply_info_block_size(out, opt, e);
	hs_reply(out, opt, NBD_REP_ACK, NULL, 0);

	if (opt == NBD_OPT_GO) {
		hs->block_sizes = want_bs;
		hs_choose(hs, e, name);
		return HS_TRANSMISSION;
	}
	free(name);
	return HS_CONTINUE;
}

/* NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT (meta.h). */
static void
hs_meta_context(struct hs_ctx *hs, uint32_t opt, const uint8_t *data,
    uint32_t len, struct buf *out)
{
	bool list = opt == NBD_OPT_LIST_META_CONTEXT;
	struct meta_request mr;
	const char *why = "";
	char *name;

	if (!list) {
		/* Replaced by every SET, even one that fails. */
		hs->meta = 0;
		hs->meta_export = NULL;
	}
	if (!hs->structured) {
		hs_reply_error(out, opt, NBD_REP_ERR_INVALID,
		    "structured replies must be negotiated first");
		return;
	}
	uint32_t err = meta_parse(data, len, list, &mr, &why);
	if (err) {
		hs_reply_error(out, opt, err, why);
		return;
	}
	const struct hs_export *e =
	    hs_find_export(hs, opt, mr.name, mr.namelen, &name, out);
	if (!e)
		return;
	/* As INFO and GO: an export this client may not open has no
	 * contexts to give it. */
	bool refused = hs_refused(hs, opt, e, name, out);
	free(name);
	if (refused)
		return;
	for (unsigned m = 0; m < META_N_CONTEXTS; m++) {
		if (!(mr.selected & (1u << m)))
			continue;
		const char *cn = meta_context_name(m);
		size_t n = strlen(cn);
		buf_put_u64(out, NBD_REP_MAGIC);
		buf_put_u32(out, opt);
		buf_put_u32(out, NBD_REP_META_CONTEXT);
		buf_put_u32(out, (uint32_t)(4 + n));
		/* A LIST's ids are reserved: 0. */
		buf_put_u32(out, list ? 0 : meta_context_id(m));
		buf_put(out, cn, n);
	}
	hs_reply(out, opt, NBD_REP_ACK, NULL, 0);
	if (!list) {
		hs->meta = mr.selected;
		hs->meta_export = e;
	}
}

static void
hs_list(struct hs_ctx *hs, uint32_t len, struct buf *out)
{
	if (len != 0) {
		hs_reply_error(out, NBD_OPT_LIST, NBD_REP_ERR_INVALID,
		    "LIST takes no data");
		return;
	}
	const struct hs_export *e;
	for (size_t i = 0; (e = hs->nth(hs->arg, i)) != NULL; i++) {
		if (e->tls_only && !hs->tls_active)
			continue; /* the spec allows leaving them out */
		if (!hs_may_open(hs, e, true))
			continue;
		size_t n = strlen(e->name);
		size_t d = e->description ? strlen(e->description) : 0;
		buf_put_u64(out, NBD_REP_MAGIC);
		buf_put_u32(out, NBD_OPT_LIST);
		buf_put_u32(out, NBD_REP_SERVER);
		buf_put_u32(out, (uint32_t)(4 + n + d));
		buf_put_u32(out, (uint32_t)n);
		buf_put(out, e->name, n);
		buf_put(out, e->description, d);
	}
	hs_reply(out, NBD_OPT_LIST, NBD_REP_ACK, NULL, 0);
}

static enum hs_action
hs_starttls(struct hs_ctx *hs, uint32_t len, struct buf *out)
{
	uint32_t opt = NBD_OPT_STARTTLS;

	if (len != 0) {
		hs_reply_error(out, opt, NBD_REP_ERR_INVALID,
		    "STARTTLS takes no data");
		return HS_CONTINUE;
	}
	if (!hs->tls_offered) {
		hs_reply_error(out, opt, NBD_REP_ERR_POLICY,
		    "TLS is not enabled on this server");
		return HS_CONTINUE;
	}
	if (hs->tls_active) {
		hs_reply_error(out, opt, NBD_REP_ERR_INVALID,
		    "TLS is already active");
		return HS_CONTINUE;
	}
	/* What was negotiated in the clear does not carry over. */
	hs->structured = false;
	hs->meta = 0;
	hs->meta_export = NULL;
	hs_reply(out, opt, NBD_REP_ACK, NULL, 0);
	return HS_STARTTLS;
}

enum hs_action
hs_option(struct hs_ctx *hs, uint32_t opt, const uint8_t *data, uint32_t len,
    struct buf *out)
{
	if (hs->tls_required && !hs->tls_active && opt != NBD_OPT_STARTTLS &&
	    opt != NBD_OPT_ABORT) {
		if (opt == NBD_OPT_EXPORT_NAME) {
			/* It cannot be answered with an error: hang up. */
			hs_log_refusal(
			    "handshake: EXPORT_NAME without TLS, which "
			    "tls.mode requires; disconnecting");
			return HS_CLOSE;
		}
		hs_reply_error(out, opt, NBD_REP_ERR_TLS_REQD,
		    "TLS is required: send STARTTLS first");
		return HS_CONTINUE;
	}
	switch (opt) {
	case NBD_OPT_STARTTLS:
		return hs_starttls(hs, len, out);
	case NBD_OPT_EXPORT_NAME:
		return hs_export_name(hs, data, len, out);
	case NBD_OPT_ABORT:
		hs_reply(out, opt, NBD_REP_ACK, NULL, 0);
		return HS_CLOSE;
	case NBD_OPT_LIST:
		hs_list(hs, len, out);
		return HS_CONTINUE;
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		return hs_info_go(hs, opt, data, len, out);
	case NBD_OPT_LIST_META_CONTEXT:
	case NBD_OPT_SET_META_CONTEXT:
		hs_meta_context(hs, opt, data, len, out);
		return HS_CONTINUE;
	case NBD_OPT_STRUCTURED_REPLY:
		if (len != 0) {
			hs_reply_error(out, opt, NBD_REP_ERR_INVALID,
			    "STRUCTURED_REPLY takes no data");
			return HS_CONTINUE;
		}
		hs->structured = true;
		hs_reply(out, opt, NBD_REP_ACK, NULL, 0);
		return HS_CONTINUE;
	default:
		log_debug("handshake: unsupported option %s (%u)",
		    hs_option_name(opt), opt);
		hs_reply_error(out, opt, NBD_REP_ERR_UNSUP,
		    "option not supported by wbd");
		return HS_CONTINUE;
	}
}

const char *
hs_option_name(uint32_t opt)
{
	switch (opt) {
	case NBD_OPT_EXPORT_NAME: return "EXPORT_NAME";
	case NBD_OPT_ABORT: return "ABORT";
	case NBD_OPT_LIST: return "LIST";
	case NBD_OPT_PEEK_EXPORT: return "PEEK_EXPORT";
	case NBD_OPT_STARTTLS: return "STARTTLS";
	case NBD_OPT_INFO: return "INFO";
	case NBD_OPT_GO: return "GO";
	case NBD_OPT_STRUCTURED_REPLY: return "STRUCTURED_REPLY";
	case NBD_OPT_LIST_META_CONTEXT: return "LIST_META_CONTEXT";
	case NBD_OPT_SET_META_CONTEXT: return "SET_META_CONTEXT";
	case NBD_OPT_EXTENDED_HEADERS: return "EXTENDED_HEADERS";
	default: return "UNKNOWN";
	}
}

void
hs_ctx_clear(struct hs_ctx *hs)
{
	free(hs->chosen_name);
	hs->chosen_name = NULL;
	hs->chosen = NULL;
	hs->meta = 0;
	hs->meta_export = NULL;
}
