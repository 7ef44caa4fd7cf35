/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-handshake.c - the option parser: every option wbd knows, the errors
 * the protocol prescribes for malformed ones, and unknown options.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "buf.h"
#include "handshake.h"
#include "meta.h"
#include "nbd-proto.h"

static const struct hs_export exports[] = {
	{ .name = "disk0", .description = "scratch disk", .size_bytes = 1 << 20,
	  .tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH,
	  .max_block_bytes = 32 << 20 },
	{ .name = "ro", .description = NULL, .size_bytes = 4096,
	  .tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_READ_ONLY,
	  .max_block_bytes = 32 << 20 },
};

static const struct hs_export *
lookup(void *arg, const char *name)
{
	if (!*name)
		return &exports[0];
	for (size_t i = 0; i < 2; i++)
		if (strcmp(exports[i].name, name) == 0)
			return &exports[i];
	return NULL;
}

static const struct hs_export *
nth(void *arg, size_t i)
{
	return i < 2 ? &exports[i] : NULL;
}

struct fixture {
	struct hs_ctx hs;
	struct buf out;
	size_t pos;             /* parse position in out */
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	f->hs.lookup = lookup;
	f->hs.nth = nth;
	buf_init(&f->out);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	hs_ctx_clear(&f->hs);
	buf_free(&f->out);
	free(f);
	return 0;
}

/* Read the next option reply; returns its type, data in *DATA. */
static uint32_t
next_reply(struct fixture *f, uint32_t want_opt, const uint8_t **data,
    uint32_t *len)
{
	assert_true(f->out.len >= f->pos + 20);
	const uint8_t *p = f->out.data + f->pos;
	assert_true(get_u64(p) == NBD_REP_MAGIC);
	assert_int_equal(get_u32(p + 8), want_opt);
	uint32_t type = get_u32(p + 12);
	*len = get_u32(p + 16);
	assert_true(f->out.len >= f->pos + 20 + *len);
	*data = p + 20;
	f->pos += 20 + *len;
	return type;
}

static void
assert_all_read(struct fixture *f)
{
	assert_int_equal(f->pos, f->out.len);
}

/* Build an INFO/GO payload. */
static size_t
info_payload(uint8_t *p, const char *name, const uint16_t *reqs, uint16_t n)
{
	size_t nl = strlen(name);
	put_u32(p, (uint32_t)nl);
	memcpy(p + 4, name, nl);
	put_u16(p + 4 + nl, n);
	for (uint16_t i = 0; i < n; i++)
		put_u16(p + 6 + nl + 2 * i, reqs[i]);
	return 6 + nl + 2u * n;
}

static void
test_greeting(void **state)
{
	struct fixture *f = *state;
	hs_greeting(&f->out);
	assert_int_equal(f->out.len, 18);
	assert_true(get_u64(f->out.data) == NBD_MAGIC);
	assert_true(get_u64(f->out.data + 8) == NBD_OPT_MAGIC);
	assert_int_equal(get_u16(f->out.data + 16),
	    NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
}

static void
test_client_flags(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(hs_client_flags(&f->hs, NBD_FLAG_C_FIXED_NEWSTYLE |
	    NBD_FLAG_C_NO_ZEROES), HS_CONTINUE);
	assert_true(f->hs.no_zeroes);
	assert_int_equal(hs_client_flags(&f->hs, 1u << 7), HS_CLOSE);
}

static void
test_go_known_export(void **state)
{
	struct fixture *f = *state;
	uint8_t p[64];
	uint16_t reqs[] = { NBD_INFO_NAME, NBD_INFO_DESCRIPTION,
	    NBD_INFO_BLOCK_SIZE };
	size_t n = info_payload(p, "disk0", reqs, 3);
	const uint8_t *d;
	uint32_t len;

	assert_int_equal(hs_option(&f->hs, NBD_OPT_GO, p, (uint32_t)n, &f->out),
	    HS_TRANSMISSION);
	assert_ptr_equal(f->hs.chosen, &exports[0]);
	assert_true(f->hs.block_sizes);

	assert_int_equal(next_reply(f, NBD_OPT_GO, &d, &len), NBD_REP_INFO);
	assert_int_equal(len, 12);
	assert_int_equal(get_u16(d), NBD_INFO_EXPORT);
	assert_true(get_u64(d + 2) == 1 << 20);
	assert_int_equal(get_u16(d + 10), exports[0].tflags);

	assert_int_equal(next_reply(f, NBD_OPT_GO, &d, &len), NBD_REP_INFO);
	assert_int_equal(get_u16(d), NBD_INFO_NAME);
	assert_memory_equal(d + 2, "disk0", 5);

	assert_int_equal(next_reply(f, NBD_OPT_GO, &d, &len), NBD_REP_INFO);
	assert_int_equal(get_u16(d), NBD_INFO_DESCRIPTION);
	assert_int_equal(len, 2 + strlen("scratch disk"));

	assert_int_equal(next_reply(f, NBD_OPT_GO, &d, &len), NBD_REP_INFO);
	assert_int_equal(len, 14);
	assert_int_equal(get_u16(d), NBD_INFO_BLOCK_SIZE);
	assert_int_equal(get_u32(d + 2), 1);
	assert_int_equal(get_u32(d + 6), 4096);
	assert_int_equal(get_u32(d + 10), 32 << 20);

	assert_int_equal(next_reply(f, NBD_OPT_GO, &d, &len), NBD_REP_ACK);
	assert_all_read(f);
}

static void
test_info_does_not_enter_transmission(void **state)
{
	struct fixture *f = *state;
	uint8_t p[64];
	size_t n = info_payload(p, "ro", NULL, 0);
	const uint8_t *d;
	uint32_t len;

	assert_int_equal(hs_option(&f->hs, NBD_OPT_INFO, p, (uint32_t)n,
	    &f->out), HS_CONTINUE);
	assert_null(f->hs.chosen);
	assert_int_equal(next_reply(f, NBD_OPT_INFO, &d, &len), NBD_REP_INFO);
	assert_int_equal(get_u16(d + 10), exports[1].tflags);
	/* Block size is sent unasked; no description for "ro". */
	assert_int_equal(next_reply(f, NBD_OPT_INFO, &d, &len), NBD_REP_INFO);
	assert_int_equal(get_u16(d), NBD_INFO_BLOCK_SIZE);
	assert_int_equal(next_reply(f, NBD_OPT_INFO, &d, &len), NBD_REP_ACK);
	assert_all_read(f);
}

static void
test_default_export(void **state)
{
	struct fixture *f = *state;
	uint8_t p[16];
	size_t n = info_payload(p, "", NULL, 0);

	assert_int_equal(hs_option(&f->hs, NBD_OPT_GO, p, (uint32_t)n, &f->out),
	    HS_TRANSMISSION);
	assert_ptr_equal(f->hs.chosen, &exports[0]);
	/* No NBD_INFO_BLOCK_SIZE asked for: not held to the maximum. */
	assert_false(f->hs.block_sizes);
}

static void
test_go_unknown_export(void **state)
{
	struct fixture *f = *state;
	uint8_t p[64];
	size_t n = info_payload(p, "nope", NULL, 0);
	const uint8_t *d;
	uint32_t len;

	assert_int_equal(hs_option(&f->hs, NBD_OPT_GO, p, (uint32_t)n, &f->out),
	    HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_GO, &d, &len),
	    NBD_REP_ERR_UNKNOWN);
	assert_true(len > 0);   /* carries a message */
	assert_all_read(f);
}

static void
test_go_malformed(void **state)
{
	struct fixture *f = *state;
	uint8_t p[64] = { 0 };
	const uint8_t *d;
	uint32_t len;

	/* Too short to hold a name length and request count. */
	assert_int_equal(hs_option(&f->hs, NBD_OPT_GO, p, 3, &f->out),
	    HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_GO, &d, &len),
	    NBD_REP_ERR_INVALID);

	/* Name length larger than the option. */
	size_t n = info_payload(p, "disk0", NULL, 0);
	put_u32(p, 1000);
	assert_int_equal(hs_option(&f->hs, NBD_OPT_GO, p, (uint32_t)n, &f->out),
	    HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_GO, &d, &len),
	    NBD_REP_ERR_INVALID);

	/* Request count that does not match the length. */
	n = info_payload(p, "disk0", NULL, 0);
	put_u16(p + 4 + 5, 3);
	assert_int_equal(hs_option(&f->hs, NBD_OPT_INFO, p, (uint32_t)n,
	    &f->out), HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_INFO, &d, &len),
	    NBD_REP_ERR_INVALID);

	/* A NUL inside the name. */
	n = info_payload(p, "disk0", NULL, 0);
	p[5] = '\0';
	assert_int_equal(hs_option(&f->hs, NBD_OPT_GO, p, (uint32_t)n, &f->out),
	    HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_GO, &d, &len),
	    NBD_REP_ERR_INVALID);
	assert_null(f->hs.chosen);
	assert_all_read(f);
}

static void
test_go_name_too_long(void **state)
{
	struct fixture *f = *state;
	size_t nl = HS_MAX_NAME_BYTES + 1;
	uint8_t *p = calloc(1, nl + 6);
	const uint8_t *d;
	uint32_t len;

	memset(p + 4, 'a', nl);
	put_u32(p, (uint32_t)nl);
	put_u16(p + 4 + nl, 0);
	assert_int_equal(hs_option(&f->hs, NBD_OPT_GO, p, (uint32_t)(nl + 6),
	    &f->out), HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_GO, &d, &len),
	    NBD_REP_ERR_TOO_BIG);
	free(p);
}

static void
test_export_name(void **state)
{
	struct fixture *f = *state;

	f->hs.no_zeroes = false;
	assert_int_equal(hs_option(&f->hs, NBD_OPT_EXPORT_NAME,
	    (const uint8_t *)"ro", 2, &f->out), HS_TRANSMISSION);
	assert_int_equal(f->out.len, 8 + 2 + 124);
	assert_true(get_u64(f->out.data) == 4096);
	assert_int_equal(get_u16(f->out.data + 8), exports[1].tflags);
}

static void
test_export_name_no_zeroes(void **state)
{
	struct fixture *f = *state;

	f->hs.no_zeroes = true;
	assert_int_equal(hs_option(&f->hs, NBD_OPT_EXPORT_NAME,
	    (const uint8_t *)"disk0", 5, &f->out), HS_TRANSMISSION);
	assert_int_equal(f->out.len, 10);
}

static void
test_export_name_unknown_closes(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(hs_option(&f->hs, NBD_OPT_EXPORT_NAME,
	    (const uint8_t *)"zzz", 3, &f->out), HS_CLOSE);
	assert_int_equal(f->out.len, 0);
}

static void
test_list(void **state)
{
	struct fixture *f = *state;
	const uint8_t *d;
	uint32_t len;

	assert_int_equal(hs_option(&f->hs, NBD_OPT_LIST, NULL, 0, &f->out),
	    HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_LIST, &d, &len), NBD_REP_SERVER);
	assert_int_equal(get_u32(d), 5);
	assert_memory_equal(d + 4, "disk0", 5);
	assert_memory_equal(d + 9, "scratch disk", len - 9);
	assert_int_equal(next_reply(f, NBD_OPT_LIST, &d, &len), NBD_REP_SERVER);
	assert_int_equal(len, 4 + 2);
	assert_int_equal(next_reply(f, NBD_OPT_LIST, &d, &len), NBD_REP_ACK);
	assert_all_read(f);

	/* LIST with data is invalid. */
	assert_int_equal(hs_option(&f->hs, NBD_OPT_LIST, (const uint8_t *)"x",
	    1, &f->out), HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_LIST, &d, &len),
	    NBD_REP_ERR_INVALID);
}

static void
test_structured_reply(void **state)
{
	struct fixture *f = *state;
	const uint8_t *d;
	uint32_t len;

	assert_int_equal(hs_option(&f->hs, NBD_OPT_STRUCTURED_REPLY, NULL, 0,
			     &f->out),
	    HS_CONTINUE);
	assert_true(f->hs.structured);
	assert_int_equal(next_reply(f, NBD_OPT_STRUCTURED_REPLY, &d, &len),
	    NBD_REP_ACK);
	assert_int_equal(hs_option(&f->hs, NBD_OPT_STRUCTURED_REPLY,
			     (const uint8_t *)"x", 1, &f->out),
	    HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_STRUCTURED_REPLY, &d, &len),
	    NBD_REP_ERR_INVALID);
}

static void
test_abort(void **state)
{
	struct fixture *f = *state;
	const uint8_t *d;
	uint32_t len;

	assert_int_equal(hs_option(&f->hs, NBD_OPT_ABORT, NULL, 0, &f->out),
	    HS_CLOSE);
	assert_int_equal(next_reply(f, NBD_OPT_ABORT, &d, &len), NBD_REP_ACK);
}

static void
test_unsupported_options(void **state)
{
	struct fixture *f = *state;
	const uint32_t opts[] = { NBD_OPT_PEEK_EXPORT, NBD_OPT_EXTENDED_HEADERS,
		12345, 0xffffffffu };
	const uint8_t *d;
	uint32_t len;

	for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
		assert_int_equal(hs_option(&f->hs, opts[i],
				     (const uint8_t *)"abc", 3, &f->out),
		    HS_CONTINUE);
		assert_int_equal(next_reply(f, opts[i], &d, &len),
		    NBD_REP_ERR_UNSUP);
	}
	assert_all_read(f);
}

/* A LIST/SET_META_CONTEXT payload: export NAME, then the NQ QUERIES. */
static size_t
meta_payload(uint8_t *p, const char *name, const char *const *queries,
    uint32_t nq)
{
	size_t nl = strlen(name), at;

	put_u32(p, (uint32_t)nl);
	memcpy(p + 4, name, nl);
	put_u32(p + 4 + nl, nq);
	at = 8 + nl;
	for (uint32_t i = 0; i < nq; i++) {
		size_t ql = strlen(queries[i]);
		put_u32(p + at, (uint32_t)ql);
		memcpy(p + at + 4, queries[i], ql);
		at += 4 + ql;
	}
	return at;
}

static void
negotiate_structured(struct fixture *f)
{
	const uint8_t *d;
	uint32_t len;

	assert_int_equal(hs_option(&f->hs, NBD_OPT_STRUCTURED_REPLY, NULL, 0,
			     &f->out),
	    HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_STRUCTURED_REPLY, &d, &len),
	    NBD_REP_ACK);
}

/* The next reply is NBD_REP_META_CONTEXT for context NAME with id ID. */
static void
expect_context(struct fixture *f, uint32_t opt, uint32_t id, const char *name)
{
	const uint8_t *d;
	uint32_t len;

	assert_int_equal(next_reply(f, opt, &d, &len), NBD_REP_META_CONTEXT);
	assert_int_equal(len, 4 + strlen(name));
	assert_int_equal(get_u32(d), id);
	assert_memory_equal(d + 4, name, strlen(name));
}

static uint32_t
meta_option(struct fixture *f, uint32_t opt, const char *name,
    const char *const *queries, uint32_t nq)
{
	uint8_t p[512];
	size_t n = meta_payload(p, name, queries, nq);

	assert_int_equal(hs_option(&f->hs, opt, p, (uint32_t)n, &f->out),
	    HS_CONTINUE);
	return (uint32_t)n;
}

static void
expect_final(struct fixture *f, uint32_t opt, uint32_t type)
{
	const uint8_t *d;
	uint32_t len;

	assert_int_equal(next_reply(f, opt, &d, &len), type);
}

static void
test_meta_needs_structured(void **state)
{
	struct fixture *f = *state;
	const char *q[] = { "base:allocation" };

	meta_option(f, NBD_OPT_SET_META_CONTEXT, "disk0", q, 1);
	expect_final(f, NBD_OPT_SET_META_CONTEXT, NBD_REP_ERR_INVALID);
	meta_option(f, NBD_OPT_LIST_META_CONTEXT, "disk0", q, 1);
	expect_final(f, NBD_OPT_LIST_META_CONTEXT, NBD_REP_ERR_INVALID);
	assert_int_equal(f->hs.meta, 0);
	assert_all_read(f);
}

static void
test_meta_list(void **state)
{
	struct fixture *f = *state;
	const char *base[] = { "base:" }, *wbd[] = { "wbd:" };
	const char *other[] = { "qemu:dirty-bitmap:b0", "base:nothing",
		"x-foo:" };
	const uint32_t L = NBD_OPT_LIST_META_CONTEXT;

	negotiate_structured(f);
	/* No query: every context, with the reserved id 0. */
	meta_option(f, L, "disk0", NULL, 0);
	expect_context(f, L, 0, "base:allocation");
	expect_context(f, L, 0, "wbd:dirty");
	expect_final(f, L, NBD_REP_ACK);
	/* An empty leaf name lists its namespace. */
	meta_option(f, L, "", base, 1);
	expect_context(f, L, 0, "base:allocation");
	expect_final(f, L, NBD_REP_ACK);
	meta_option(f, L, "ro", wbd, 1);
	expect_context(f, L, 0, "wbd:dirty");
	expect_final(f, L, NBD_REP_ACK);
	/* Unknown namespaces and leaf names match nothing. */
	meta_option(f, L, "disk0", other, 3);
	expect_final(f, L, NBD_REP_ACK);
	/* LIST selects nothing. */
	assert_int_equal(f->hs.meta, 0);
	assert_all_read(f);
}

static void
test_meta_set(void **state)
{
	struct fixture *f = *state;
	const char *q[] = { "wbd:dirty", "base:", "x-foo:bar",
		"base:allocation", "wbd:dirty" };
	const char *none[] = { "base:", "wbd:" };
	const uint32_t S = NBD_OPT_SET_META_CONTEXT;
	uint8_t p[64];
	size_t n;

	negotiate_structured(f);
	meta_option(f, S, "disk0", q, 5);
	/* Each context once, with its own id, whatever the order asked. */
	expect_context(f, S, meta_context_id(META_BASE_ALLOCATION),
	    "base:allocation");
	expect_context(f, S, meta_context_id(META_WBD_DIRTY), "wbd:dirty");
	expect_final(f, S, NBD_REP_ACK);
	assert_int_equal(f->hs.meta, META_ALL);
	/* The ids are the same on a later SET. */
	meta_option(f, S, "disk0", q + 4, 1);
	expect_context(f, S, meta_context_id(META_WBD_DIRTY), "wbd:dirty");
	expect_final(f, S, NBD_REP_ACK);
	assert_int_equal(f->hs.meta, 1u << META_WBD_DIRTY);
	/* An empty leaf name selects nothing in a SET. */
	meta_option(f, S, "disk0", none, 2);
	expect_final(f, S, NBD_REP_ACK);
	assert_int_equal(f->hs.meta, 0);
	/* Kept through GO of the same export (here by the default name). */
	meta_option(f, S, "disk0", q, 1);
	expect_context(f, S, 2, "wbd:dirty");
	expect_final(f, S, NBD_REP_ACK);
	n = info_payload(p, "", NULL, 0);
	assert_int_equal(hs_option(&f->hs, NBD_OPT_GO, p, (uint32_t)n, &f->out),
	    HS_TRANSMISSION);
	assert_int_equal(f->hs.meta, 1u << META_WBD_DIRTY);
}

static void
test_meta_set_other_export_dropped(void **state)
{
	struct fixture *f = *state;
	const char *q[] = { "base:allocation" };
	uint8_t p[64];
	size_t n;

	negotiate_structured(f);
	meta_option(f, NBD_OPT_SET_META_CONTEXT, "ro", q, 1);
	assert_int_equal(f->hs.meta, 1u << META_BASE_ALLOCATION);
	n = info_payload(p, "disk0", NULL, 0);
	assert_int_equal(hs_option(&f->hs, NBD_OPT_GO, p, (uint32_t)n, &f->out),
	    HS_TRANSMISSION);
	assert_int_equal(f->hs.meta, 0);
}

static void
test_meta_malformed(void **state)
{
	struct fixture *f = *state;
	const char *q[] = { "base:allocation" };
	const char *nocolon[] = { "allocation" }, *nons[] = { ":x" };
	const uint32_t S = NBD_OPT_SET_META_CONTEXT;
	uint8_t p[512];
	size_t n;

	negotiate_structured(f);
	meta_option(f, S, "disk0", q, 1);
	expect_context(f, S, 1, "base:allocation");
	expect_final(f, S, NBD_REP_ACK);

	/* Too short for a name length and a query count. */
	assert_int_equal(hs_option(&f->hs, S, p, 7, &f->out), HS_CONTINUE);
	expect_final(f, S, NBD_REP_ERR_INVALID);
	/* A failed SET still replaces the selection. */
	assert_int_equal(f->hs.meta, 0);

	/* A name length past the end. */
	n = meta_payload(p, "disk0", q, 1);
	put_u32(p, 200);
	assert_int_equal(hs_option(&f->hs, S, p, (uint32_t)n, &f->out),
	    HS_CONTINUE);
	expect_final(f, S, NBD_REP_ERR_INVALID);
	/* A query length past the end. */
	n = meta_payload(p, "disk0", q, 1);
	put_u32(p + 13, 16);
	assert_int_equal(hs_option(&f->hs, S, p, (uint32_t)n, &f->out),
	    HS_CONTINUE);
	expect_final(f, S, NBD_REP_ERR_INVALID);
	/* More queries counted than there are. */
	n = meta_payload(p, "disk0", q, 1);
	put_u32(p + 9, 2);
	assert_int_equal(hs_option(&f->hs, S, p, (uint32_t)n, &f->out),
	    HS_CONTINUE);
	expect_final(f, S, NBD_REP_ERR_INVALID);
	/* Trailing bytes after the queries. */
	n = meta_payload(p, "disk0", q, 1);
	assert_int_equal(hs_option(&f->hs, S, p, (uint32_t)n + 3, &f->out),
	    HS_CONTINUE);
	expect_final(f, S, NBD_REP_ERR_INVALID);
	/* No namespace. */
	meta_option(f, S, "disk0", nocolon, 1);
	expect_final(f, S, NBD_REP_ERR_INVALID);
	meta_option(f, S, "disk0", nons, 1);
	expect_final(f, S, NBD_REP_ERR_INVALID);
	/* A NUL in a query. */
	n = meta_payload(p, "disk0", q, 1);
	p[21] = '\0';
	assert_int_equal(hs_option(&f->hs, S, p, (uint32_t)n, &f->out),
	    HS_CONTINUE);
	expect_final(f, S, NBD_REP_ERR_INVALID);
	/* An unknown export. */
	meta_option(f, S, "nope", q, 1);
	expect_final(f, S, NBD_REP_ERR_UNKNOWN);
	assert_int_equal(f->hs.meta, 0);
	assert_all_read(f);
}

static void
test_meta_too_many_queries(void **state)
{
	struct fixture *f = *state;
	uint32_t nq = META_MAX_QUERIES + 1;
	size_t n = 8 + 5 + (size_t)nq * (4 + 5);
	uint8_t *p = malloc(n);

	negotiate_structured(f);
	put_u32(p, 5);
	memcpy(p + 4, "disk0", 5);
	put_u32(p + 9, nq);
	for (uint32_t i = 0; i < nq; i++) {
		put_u32(p + 13 + 9 * i, 5);
		memcpy(p + 17 + 9 * i, "base:", 5);
	}
	assert_int_equal(hs_option(&f->hs, NBD_OPT_LIST_META_CONTEXT, p,
			     (uint32_t)n, &f->out),
	    HS_CONTINUE);
	expect_final(f, NBD_OPT_LIST_META_CONTEXT, NBD_REP_ERR_TOO_BIG);
	/* At the limit: fine. */
	put_u32(p + 9, nq - 1);
	assert_int_equal(hs_option(&f->hs, NBD_OPT_LIST_META_CONTEXT, p,
			     (uint32_t)(n - 9), &f->out),
	    HS_CONTINUE);
	expect_context(f, NBD_OPT_LIST_META_CONTEXT, 0, "base:allocation");
	expect_final(f, NBD_OPT_LIST_META_CONTEXT, NBD_REP_ACK);
	assert_all_read(f);
	free(p);
}

/* The allow list's verdict, as conn.c gives it: "ro" is not for this
 * client; every question is counted. */
static unsigned asked_open, asked_listing;

static bool
may_open_not_ro(void *arg, const struct hs_export *e, bool listing)
{
	if (listing)
		asked_listing++;
	else
		asked_open++;
	return strcmp(e->name, "ro") != 0;
}

static void
test_refused_export(void **state)
{
	struct fixture *f = *state;
	uint8_t p[64];
	uint16_t reqs[] = { NBD_INFO_BLOCK_SIZE };
	const uint8_t *d;
	uint32_t len;

	f->hs.may_open = may_open_not_ro;
	asked_open = asked_listing = 0;

	/* INFO and GO: NBD_REP_ERR_POLICY, and the client may go on. */
	size_t n = info_payload(p, "ro", reqs, 1);
	assert_int_equal(hs_option(&f->hs, NBD_OPT_INFO, p, (uint32_t)n,
			     &f->out),
	    HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_INFO, &d, &len),
	    NBD_REP_ERR_POLICY);
	assert_int_equal(hs_option(&f->hs, NBD_OPT_GO, p, (uint32_t)n, &f->out),
	    HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_GO, &d, &len),
	    NBD_REP_ERR_POLICY);
	assert_non_null(memmem(d, len, "\"ro\"", 4));
	assert_null(f->hs.chosen);
	assert_int_equal(asked_open, 2);

	/* LIST leaves it out, without it counting as a refusal. */
	assert_int_equal(hs_option(&f->hs, NBD_OPT_LIST, NULL, 0, &f->out),
	    HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_LIST, &d, &len), NBD_REP_SERVER);
	assert_memory_equal(d + 4, "disk0", 5);
	assert_int_equal(next_reply(f, NBD_OPT_LIST, &d, &len), NBD_REP_ACK);
	assert_int_equal(asked_listing, 2);
	assert_int_equal(asked_open, 2);

	/* Its metadata contexts: refused the same way, none selected. */
	const char *const q[] = { "base:allocation" };
	negotiate_structured(f);
	meta_option(f, NBD_OPT_LIST_META_CONTEXT, "ro", q, 1);
	expect_final(f, NBD_OPT_LIST_META_CONTEXT, NBD_REP_ERR_POLICY);
	meta_option(f, NBD_OPT_SET_META_CONTEXT, "ro", q, 1);
	expect_final(f, NBD_OPT_SET_META_CONTEXT, NBD_REP_ERR_POLICY);
	assert_int_equal(f->hs.meta, 0);
	assert_int_equal(asked_open, 4);

	/* An export it may open still opens. */
	n = info_payload(p, "disk0", reqs, 1);
	assert_int_equal(hs_option(&f->hs, NBD_OPT_GO, p, (uint32_t)n, &f->out),
	    HS_TRANSMISSION);
	assert_ptr_equal(f->hs.chosen, &exports[0]);
	while (next_reply(f, NBD_OPT_GO, &d, &len) != NBD_REP_ACK)
		;
	assert_all_read(f);
}

/* EXPORT_NAME has no error reply: a refused client is hung up on. */
static void
test_refused_export_name_closes(void **state)
{
	struct fixture *f = *state;

	f->hs.may_open = may_open_not_ro;
	assert_int_equal(hs_option(&f->hs, NBD_OPT_EXPORT_NAME,
			     (const uint8_t *)"ro", 2, &f->out),
	    HS_CLOSE);
	assert_int_equal(f->out.len, 0);
	assert_null(f->hs.chosen);
}

/* STARTTLS: refused by policy when TLS is off, checked, then accepted
 * once; what was negotiated in the clear is forgotten. */
static void
test_starttls(void **state)
{
	struct fixture *f = *state;
	const uint8_t *d;
	uint32_t len;

	assert_int_equal(hs_option(&f->hs, NBD_OPT_STARTTLS, NULL, 0, &f->out),
	    HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_STARTTLS, &d, &len),
	    NBD_REP_ERR_POLICY);

	f->hs.tls_offered = true;
	assert_int_equal(hs_option(&f->hs, NBD_OPT_STARTTLS,
			     (const uint8_t *)"x", 1, &f->out),
	    HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_STARTTLS, &d, &len),
	    NBD_REP_ERR_INVALID);
	assert_int_equal(hs_option(&f->hs, NBD_OPT_STRUCTURED_REPLY, NULL, 0,
			     &f->out),
	    HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_STRUCTURED_REPLY, &d, &len),
	    NBD_REP_ACK);
	assert_true(f->hs.structured);
	assert_int_equal(hs_option(&f->hs, NBD_OPT_STARTTLS, NULL, 0, &f->out),
	    HS_STARTTLS);
	assert_int_equal(next_reply(f, NBD_OPT_STARTTLS, &d, &len),
	    NBD_REP_ACK);
	assert_int_equal(len, 0);
	assert_false(f->hs.structured);

	f->hs.tls_active = true;
	assert_int_equal(hs_option(&f->hs, NBD_OPT_STARTTLS, NULL, 0, &f->out),
	    HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_STARTTLS, &d, &len),
	    NBD_REP_ERR_INVALID);
	assert_all_read(f);
}

/* tls.mode "require": every option but STARTTLS and ABORT gets TLS_REQD
 * (EXPORT_NAME, which cannot, hangs up) until TLS is up. */
static void
test_tls_required(void **state)
{
	struct fixture *f = *state;
	const uint8_t *d;
	uint32_t len;
	uint8_t p[64];
	size_t n = info_payload(p, "disk0", NULL, 0);
	const uint32_t opts[] = { NBD_OPT_LIST, NBD_OPT_INFO, NBD_OPT_GO,
		NBD_OPT_STRUCTURED_REPLY, 12345 };

	f->hs.tls_offered = f->hs.tls_required = true;
	for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
		assert_int_equal(hs_option(&f->hs, opts[i], p, (uint32_t)n,
				     &f->out),
		    HS_CONTINUE);
		assert_int_equal(next_reply(f, opts[i], &d, &len),
		    NBD_REP_ERR_TLS_REQD);
	}
	assert_false(f->hs.structured);
	assert_int_equal(hs_option(&f->hs, NBD_OPT_EXPORT_NAME,
			     (const uint8_t *)"disk0", 5, &f->out),
	    HS_CLOSE);
	assert_all_read(f);

	f->hs.tls_active = true;
	assert_int_equal(hs_option(&f->hs, NBD_OPT_GO, p, (uint32_t)n, &f->out),
	    HS_TRANSMISSION);
	assert_int_equal(next_reply(f, NBD_OPT_GO, &d, &len), NBD_REP_INFO);
}

static const struct hs_export tls_exports[] = {
	{ .name = "open",
	    .size_bytes = 4096,
	    .tflags = NBD_FLAG_HAS_FLAGS,
	    .max_block_bytes = 32 << 20 },
	{ .name = "secret",
	    .size_bytes = 4096,
	    .tflags = NBD_FLAG_HAS_FLAGS,
	    .max_block_bytes = 32 << 20,
	    .tls_only = true },
};

static const struct hs_export *
tls_lookup(void *arg, const char *name)
{
	for (size_t i = 0; i < 2; i++)
		if (strcmp(tls_exports[i].name, name) == 0)
			return &tls_exports[i];
	return NULL;
}

static const struct hs_export *
tls_nth(void *arg, size_t i)
{
	return i < 2 ? &tls_exports[i] : NULL;
}

/* A TLS-only export on a server where TLS is optional: TLS_REQD for it
 * alone, left out of LIST, until TLS is up. */
static void
test_tls_only_export(void **state)
{
	struct fixture *f = *state;
	const uint8_t *d;
	uint32_t len;
	uint8_t p[64];
	size_t n = info_payload(p, "secret", NULL, 0);

	f->hs.lookup = tls_lookup;
	f->hs.nth = tls_nth;
	f->hs.tls_offered = true;
	assert_int_equal(hs_option(&f->hs, NBD_OPT_INFO, p, (uint32_t)n,
			     &f->out),
	    HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_INFO, &d, &len),
	    NBD_REP_ERR_TLS_REQD);
	const char *const q[] = { "base:allocation" };
	negotiate_structured(f);
	meta_option(f, NBD_OPT_SET_META_CONTEXT, "secret", q, 1);
	expect_final(f, NBD_OPT_SET_META_CONTEXT, NBD_REP_ERR_TLS_REQD);
	assert_int_equal(f->hs.meta, 0);
	assert_int_equal(hs_option(&f->hs, NBD_OPT_LIST, NULL, 0, &f->out),
	    HS_CONTINUE);
	assert_int_equal(next_reply(f, NBD_OPT_LIST, &d, &len), NBD_REP_SERVER);
	assert_int_equal(get_u32(d), 4);
	assert_memory_equal(d + 4, "open", 4);
	assert_int_equal(next_reply(f, NBD_OPT_LIST, &d, &len), NBD_REP_ACK);
	assert_int_equal(hs_option(&f->hs, NBD_OPT_EXPORT_NAME,
			     (const uint8_t *)"secret", 6, &f->out),
	    HS_CLOSE);
	assert_all_read(f);

	f->hs.tls_active = true;
	assert_int_equal(hs_option(&f->hs, NBD_OPT_GO, p, (uint32_t)n, &f->out),
	    HS_TRANSMISSION);
	assert_int_equal(next_reply(f, NBD_OPT_GO, &d, &len), NBD_REP_INFO);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_greeting),
		T(test_starttls),
		T(test_tls_required),
		T(test_tls_only_export),
		T(test_refused_export),
		T(test_refused_export_name_closes),
		T(test_client_flags),
		T(test_go_known_export),
		T(test_info_does_not_enter_transmission),
		T(test_default_export),
		T(test_go_unknown_export),
		T(test_go_malformed),
		T(test_go_name_too_long),
		T(test_export_name),
		T(test_export_name_no_zeroes),
		T(test_export_name_unknown_closes),
		T(test_list),
		T(test_structured_reply),
		T(test_abort),
		T(test_unsupported_options),
		T(test_meta_needs_structured),
		T(test_meta_list),
		T(test_meta_set),
		T(test_meta_set_other_export_dropped),
		T(test_meta_malformed),
		T(test_meta_too_many_queries),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
