/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-proto.c - request decoding, validation and reply encoding.
 * Every malformed request the daemon must refuse has a case here.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "buf.h"
#include "proto.h"

#define EXPORT_BYTES (1u << 20)

static const struct proto_export_view rw_view = {
	.size_bytes = EXPORT_BYTES,
	.tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
	    NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES |
	    NBD_FLAG_SEND_FAST_ZERO | NBD_FLAG_CAN_MULTI_CONN,
};

static const struct proto_export_view ro_view = {
	.size_bytes = EXPORT_BYTES,
	.tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_READ_ONLY | NBD_FLAG_SEND_FLUSH,
};

static uint32_t
check(const struct proto_export_view *v, uint16_t type, uint16_t flags,
    uint64_t off, uint32_t count)
{
	struct nbd_request r = { .type = type, .flags = flags, .offset = off,
	    .count = count, .cookie = 7 };
	const char *why = NULL;
	uint32_t err = proto_check_request(&r, v, &why);
	if (err)
		assert_non_null(why);
	return err;
}

static void
test_decode_roundtrip(void **state)
{
	struct nbd_request in = { .flags = NBD_CMD_FLAG_FUA,
	    .type = NBD_CMD_WRITE, .cookie = 0x0102030405060708ull,
	    .offset = 0x1122334455667788ull, .count = 4096 }, out;
	uint8_t wire[NBD_REQUEST_SIZE];

	proto_encode_request(wire, &in);
	assert_int_equal(get_u32(wire), NBD_REQUEST_MAGIC);
	assert_int_equal(proto_decode_request(wire, &out), 0);
	assert_int_equal(out.flags, in.flags);
	assert_int_equal(out.type, in.type);
	assert_true(out.cookie == in.cookie);
	assert_true(out.offset == in.offset);
	assert_int_equal(out.count, in.count);
	assert_int_equal(proto_payload_bytes(&out), 4096);
}

static void
test_decode_bad_magic(void **state)
{
	struct nbd_request in = { .type = NBD_CMD_READ, .count = 1 }, out;
	uint8_t wire[NBD_REQUEST_SIZE];

	proto_encode_request(wire, &in);
	wire[0] ^= 0xff;
	assert_int_equal(proto_decode_request(wire, &out), -1);
}

static void
test_valid_requests(void **state)
{
	assert_int_equal(check(&rw_view, NBD_CMD_READ, 0, 0, 4096), 0);
	assert_int_equal(check(&rw_view, NBD_CMD_READ, 0, EXPORT_BYTES - 1, 1), 0);
	assert_int_equal(check(&rw_view, NBD_CMD_WRITE, NBD_CMD_FLAG_FUA, 512, 1000), 0);
	assert_int_equal(check(&rw_view, NBD_CMD_FLUSH, 0, 0, 0), 0);
	assert_int_equal(check(&rw_view, NBD_CMD_TRIM, 0, 0, EXPORT_BYTES), 0);
	assert_int_equal(check(&rw_view, NBD_CMD_WRITE_ZEROES,
	    NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FAST_ZERO,
	    0, 65536), 0);
	assert_int_equal(check(&rw_view, NBD_CMD_DISC, 0, 0, 0), 0);
	assert_int_equal(check(&ro_view, NBD_CMD_READ, 0, 0, 4096), 0);
	assert_int_equal(check(&ro_view, NBD_CMD_FLUSH, 0, 0, 0), 0);
}

static void
test_beyond_end(void **state)
{
	/* Reads beyond the end: EINVAL; writes: ENOSPC (proto.md). */
	assert_int_equal(check(&rw_view, NBD_CMD_READ, 0, EXPORT_BYTES, 1), NBD_EINVAL);
	assert_int_equal(check(&rw_view, NBD_CMD_READ, 0, EXPORT_BYTES - 1, 2), NBD_EINVAL);
	assert_int_equal(check(&rw_view, NBD_CMD_WRITE, 0, EXPORT_BYTES - 1, 2), NBD_ENOSPC);
	assert_int_equal(check(&rw_view, NBD_CMD_TRIM, 0, EXPORT_BYTES, 1), NBD_ENOSPC);
	assert_int_equal(check(&rw_view, NBD_CMD_WRITE_ZEROES, 0, EXPORT_BYTES + 4096, 1), NBD_ENOSPC);
	/* offset + count overflowing 64 bits must not wrap around. */
	assert_int_equal(check(&rw_view, NBD_CMD_READ, 0, UINT64_MAX, 4096), NBD_EINVAL);
	assert_int_equal(check(&rw_view, NBD_CMD_WRITE, 0, UINT64_MAX - 10, 100), NBD_ENOSPC);
}

static void
test_unknown_command(void **state)
{
	assert_int_equal(check(&rw_view, 99, 0, 0, 1), NBD_EINVAL);
	assert_int_equal(check(&rw_view, NBD_CMD_BLOCK_STATUS, 0, 0, 4096), NBD_EINVAL);
}

/* CACHE: like a READ without its payload: no maximum, read-only too. */
static void
test_cache(void **state)
{
	struct proto_export_view big = rw_view;
	big.size_bytes = UINT64_C(1) << 40;
	assert_int_equal(check(&rw_view, NBD_CMD_CACHE, 0, 0, 4096), 0);
	assert_int_equal(check(&ro_view, NBD_CMD_CACHE, 0, 0, 4096), 0);
	assert_int_equal(check(&big, NBD_CMD_CACHE, 0, 0, UINT32_MAX), 0);
	assert_int_equal(check(&rw_view, NBD_CMD_CACHE, NBD_CMD_FLAG_FUA, 0, 1),
	    0);
	assert_int_equal(check(&rw_view, NBD_CMD_CACHE, NBD_CMD_FLAG_REQ_ONE, 0,
			     1),
	    NBD_EINVAL);
	assert_int_equal(check(&rw_view, NBD_CMD_CACHE, 0, 0, 0), NBD_EINVAL);
	assert_int_equal(check(&ro_view, NBD_CMD_CACHE, 0, EXPORT_BYTES, 1),
	    NBD_EINVAL);
}

static void
test_bad_flags(void **state)
{
	assert_int_equal(check(&rw_view, NBD_CMD_READ, NBD_CMD_FLAG_DF, 0, 1), NBD_EINVAL);
	assert_int_equal(check(&rw_view, NBD_CMD_WRITE, NBD_CMD_FLAG_NO_HOLE, 0, 1), NBD_EINVAL);
	assert_int_equal(check(&rw_view, NBD_CMD_WRITE, 0x8000, 0, 1), NBD_EINVAL);
	assert_int_equal(check(&rw_view, NBD_CMD_TRIM, NBD_CMD_FLAG_FAST_ZERO, 0, 1), NBD_EINVAL);
	uint16_t no_hole = NBD_CMD_FLAG_NO_HOLE;
	assert_int_equal(check(&rw_view, NBD_CMD_FLUSH, no_hole, 0, 0),
	    NBD_EINVAL);
	assert_int_equal(check(&rw_view, NBD_CMD_DISC, no_hole, 0, 0),
	    NBD_EINVAL);
	/* FUA without SEND_FUA advertised. */
	assert_int_equal(check(&ro_view, NBD_CMD_READ, NBD_CMD_FLAG_FUA, 0, 1), NBD_EINVAL);
}

/* With SEND_FUA advertised the server must accept FUA on every command,
 * even where it means nothing (the spec's "Request message" flags). */
static void
test_fua_accepted_on_every_command(void **state)
{
	static const uint16_t cmds[] = { NBD_CMD_READ, NBD_CMD_WRITE,
		NBD_CMD_TRIM, NBD_CMD_WRITE_ZEROES };
	uint16_t fua = NBD_CMD_FLAG_FUA;

	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		assert_int_equal(check(&rw_view, cmds[i], fua, 0, 1), 0);
	assert_int_equal(check(&rw_view, NBD_CMD_FLUSH, fua, 0, 0), 0);
	assert_int_equal(check(&rw_view, NBD_CMD_DISC, fua, 0, 0), 0);
}

static void
test_flush_with_range(void **state)
{
	assert_int_equal(check(&rw_view, NBD_CMD_FLUSH, 0, 4096, 0), NBD_EINVAL);
	assert_int_equal(check(&rw_view, NBD_CMD_FLUSH, 0, 0, 4096), NBD_EINVAL);
}

static void
test_zero_length(void **state)
{
	assert_int_equal(check(&rw_view, NBD_CMD_READ, 0, 0, 0), NBD_EINVAL);
	assert_int_equal(check(&rw_view, NBD_CMD_WRITE, 0, 0, 0), NBD_EINVAL);
	assert_int_equal(check(&rw_view, NBD_CMD_TRIM, 0, 0, 0), NBD_EINVAL);
}

static void
test_oversized(void **state)
{
	struct proto_export_view big = rw_view;
	big.size_bytes = UINT64_C(1) << 40;
	assert_int_equal(check(&big, NBD_CMD_READ, 0, 0, PROTO_MAX_REQUEST_BYTES), 0);
	assert_int_equal(check(&big, NBD_CMD_READ, 0, 0, PROTO_MAX_REQUEST_BYTES + 1), NBD_EINVAL);
	assert_int_equal(check(&big, NBD_CMD_WRITE, 0, 0, PROTO_MAX_REQUEST_BYTES + 1), NBD_EINVAL);
	/* A client that did not agree on block sizes: up to its limit. */
	big.max_request_bytes = 64u << 20;
	assert_int_equal(check(&big, NBD_CMD_READ, 0, 0, 40u << 20), 0);
	assert_int_equal(check(&big, NBD_CMD_WRITE, 0, 0, 64u << 20), 0);
	assert_int_equal(check(&big, NBD_CMD_READ, 0, 0, (64u << 20) + 1),
	    NBD_EINVAL);
	assert_int_equal(check(&big, NBD_CMD_WRITE, 0, 0, (64u << 20) + 1),
	    NBD_EINVAL);
	assert_true(proto_max_discard_bytes(&big) == 128u << 20);
	big.max_request_bytes = PROTO_MAX_REQUEST_BYTES;
	assert_true(proto_max_discard_bytes(&big) == PROTO_MAX_DISCARD_BYTES);
	/* TRIM and WRITE_ZEROES carry no payload: no maximum applies. */
	assert_int_equal(check(&big, NBD_CMD_TRIM, 0, 0, UINT32_MAX), 0);
	assert_int_equal(check(&big, NBD_CMD_WRITE_ZEROES, 0, 0, UINT32_MAX), 0);
}

static void
test_readonly(void **state)
{
	assert_int_equal(check(&ro_view, NBD_CMD_WRITE, 0, 0, 1), NBD_EPERM);
	assert_int_equal(check(&ro_view, NBD_CMD_TRIM, 0, 0, 1), NBD_EPERM);
	assert_int_equal(check(&ro_view, NBD_CMD_WRITE_ZEROES, 0, 0, 1), NBD_EPERM);
}

static void
test_simple_reply(void **state)
{
	uint8_t p[NBD_SIMPLE_REPLY_SIZE];

	proto_encode_simple_reply(p, 0xdeadbeefcafef00dull, NBD_EIO);
	assert_int_equal(get_u32(p), NBD_SIMPLE_REPLY_MAGIC);
	assert_int_equal(get_u32(p + 4), NBD_EIO);
	assert_true(get_u64(p + 8) == 0xdeadbeefcafef00dull);
}

static void
test_structured_reply(void **state)
{
	uint8_t p[NBD_STRUCTURED_REPLY_SIZE];

	proto_encode_structured_hdr(p, NBD_REPLY_FLAG_DONE,
	    NBD_REPLY_TYPE_OFFSET_DATA, 42, 8 + 512);
	assert_int_equal(get_u32(p), NBD_STRUCTURED_REPLY_MAGIC);
	assert_int_equal(get_u16(p + 4), NBD_REPLY_FLAG_DONE);
	assert_int_equal(get_u16(p + 6), NBD_REPLY_TYPE_OFFSET_DATA);
	assert_true(get_u64(p + 8) == 42);
	assert_int_equal(get_u32(p + 16), 520);
}

static void
test_errno_mapping(void **state)
{
	assert_int_equal(proto_errno_to_nbd(0), NBD_SUCCESS);
	assert_int_equal(proto_errno_to_nbd(EPERM), NBD_EPERM);
	assert_int_equal(proto_errno_to_nbd(EROFS), NBD_EPERM);
	assert_int_equal(proto_errno_to_nbd(EIO), NBD_EIO);
	assert_int_equal(proto_errno_to_nbd(ENOMEM), NBD_ENOMEM);
	assert_int_equal(proto_errno_to_nbd(EINVAL), NBD_EINVAL);
	assert_int_equal(proto_errno_to_nbd(ENOSPC), NBD_ENOSPC);
	assert_int_equal(proto_errno_to_nbd(EDQUOT), NBD_ENOSPC);
	assert_int_equal(proto_errno_to_nbd(EOVERFLOW), NBD_EOVERFLOW);
	assert_int_equal(proto_errno_to_nbd(ENOTSUP), NBD_ENOTSUP);
	assert_int_equal(proto_errno_to_nbd(EOPNOTSUPP), NBD_ENOTSUP);
	assert_int_equal(proto_errno_to_nbd(ESHUTDOWN), NBD_ESHUTDOWN);
	/* Anything else is an I/O error. */
	assert_int_equal(proto_errno_to_nbd(EBADF), NBD_EIO);
	assert_int_equal(proto_errno_to_nbd(ENXIO), NBD_EIO);
}

/* BLOCK_STATUS: only with a context selected (so structured replies),
 * REQ_ONE accepted, any length within the export, on read-only too. */
static void
test_block_status(void **state)
{
	struct proto_export_view v = rw_view, ro = ro_view;
	uint16_t one = NBD_CMD_FLAG_REQ_ONE;
	const uint16_t bs = NBD_CMD_BLOCK_STATUS;

	v.structured = ro.structured = true;
	assert_int_equal(check(&v, bs, 0, 0, 4096), NBD_EINVAL);
	v.meta = ro.meta = 1;
	assert_int_equal(check(&v, bs, 0, 0, 4096), 0);
	assert_int_equal(check(&v, bs, one, 0, EXPORT_BYTES), 0);
	assert_int_equal(check(&ro, bs, one, 0, 4096), 0);
	assert_int_equal(check(&v, bs, NBD_CMD_FLAG_FUA | one, 0, 1), 0);
	assert_int_equal(check(&v, bs, NBD_CMD_FLAG_NO_HOLE, 0, 1), NBD_EINVAL);
	assert_int_equal(check(&v, bs, 0, 0, 0), NBD_EINVAL);
	assert_int_equal(check(&v, bs, 0, EXPORT_BYTES - 1, 2), NBD_EINVAL);
	assert_int_equal(check(&ro, bs, 0, EXPORT_BYTES, 1), NBD_EINVAL);
	/* REQ_ONE belongs to BLOCK_STATUS alone. */
	assert_int_equal(check(&v, NBD_CMD_READ, one, 0, 1), NBD_EINVAL);
	/* Not without structured replies, whatever else says so. */
	v.structured = false;
	assert_int_equal(check(&v, bs, 0, 0, 4096), NBD_EINVAL);
}

static void
test_block_status_reply(void **state)
{
	const struct proto_extent e[2] = { { 4096, 3 }, { 512, 0 } };
	uint8_t p[64];

	assert_int_equal(proto_block_status_bytes(2), 20 + 4 + 16);
	assert_int_equal(proto_encode_block_status(p, 99, true, 2, e, 2), 40);
	assert_int_equal(get_u32(p), NBD_STRUCTURED_REPLY_MAGIC);
	assert_int_equal(get_u16(p + 4), NBD_REPLY_FLAG_DONE);
	assert_int_equal(get_u16(p + 6), NBD_REPLY_TYPE_BLOCK_STATUS);
	assert_true(get_u64(p + 8) == 99);
	assert_int_equal(get_u32(p + 16), 4 + 16);
	assert_int_equal(get_u32(p + 20), 2);
	assert_int_equal(get_u32(p + 24), 4096);
	assert_int_equal(get_u32(p + 28), 3);
	assert_int_equal(get_u32(p + 32), 512);
	assert_int_equal(get_u32(p + 36), 0);
	proto_encode_block_status(p, 99, false, 1, e, 1);
	assert_int_equal(get_u16(p + 4), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode_roundtrip),
		cmocka_unit_test(test_decode_bad_magic),
		cmocka_unit_test(test_valid_requests),
		cmocka_unit_test(test_beyond_end),
		cmocka_unit_test(test_unknown_command),
		cmocka_unit_test(test_bad_flags),
		cmocka_unit_test(test_fua_accepted_on_every_command),
		cmocka_unit_test(test_flush_with_range),
		cmocka_unit_test(test_zero_length),
		cmocka_unit_test(test_oversized),
		cmocka_unit_test(test_readonly),
		cmocka_unit_test(test_block_status),
		cmocka_unit_test(test_cache),
		cmocka_unit_test(test_block_status_reply),
		cmocka_unit_test(test_simple_reply),
		cmocka_unit_test(test_structured_reply),
		cmocka_unit_test(test_errno_mapping),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
