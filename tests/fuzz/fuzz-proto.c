/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz-proto.c - the transmission phase's request check: the input's
 * first 11 bytes describe the export and the connection (size, 8 bytes;
 * transmission flags, 2; a byte: structured replies in bit 0, the
 * metadata contexts selected in bits 1-2, a client that did not agree on
 * block sizes in bit 3), then come 28-byte request headers, each decoded
 * (proto_decode_request) and checked (proto_check_request) as conn.c
 * does, until a bad magic.
 *
 * Beyond not crashing: a header re-encodes to the same bytes, and a
 * request that passes the check is one wbd can carry out (a known
 * command, within the export, within the maximum request size, no write
 * to a read-only export, BLOCK_STATUS only with a context selected).
 */
#include <string.h>

#include "buf.h"
#include "fuzz.h"
#include "nbd-proto.h"
#include "proto.h"

#define VIEW_BYTES 11

static void
fuzz_check_passed(const struct nbd_request *req,
    const struct proto_export_view *ev)
{
	switch (req->type) {
	case NBD_CMD_FLUSH:
	case NBD_CMD_DISC:
		FUZZ_CHECK(proto_payload_bytes(req) == 0);
		return;
	case NBD_CMD_READ:
	case NBD_CMD_WRITE:
		FUZZ_CHECK(req->count <= (ev->max_request_bytes ?
						 ev->max_request_bytes :
						 PROTO_MAX_REQUEST_BYTES));
		break;
	case NBD_CMD_BLOCK_STATUS:
		/* Only with a metadata context selected, so structured
		 * replies. */
		FUZZ_CHECK(ev->meta != 0 && ev->structured);
		FUZZ_CHECK(proto_payload_bytes(req) == 0);
		break;
	case NBD_CMD_TRIM:
	case NBD_CMD_WRITE_ZEROES:
	case NBD_CMD_CACHE:
		FUZZ_CHECK(proto_payload_bytes(req) == 0);
		break;
	default:
		FUZZ_CHECK(!"an unknown command passed the check");
	}
	FUZZ_CHECK(req->count > 0);
	FUZZ_CHECK(req->offset <= ev->size_bytes);
	FUZZ_CHECK(req->count <= ev->size_bytes - req->offset);
	/* A read-only export takes only what does not write. */
	if (ev->tflags & NBD_FLAG_READ_ONLY)
		FUZZ_CHECK(req->type == NBD_CMD_READ ||
		    req->type == NBD_CMD_CACHE ||
		    req->type == NBD_CMD_BLOCK_STATUS);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_export_view ev = { 0 };

	if (size < VIEW_BYTES)
		return 0;
	ev.size_bytes = get_u64(data);
	ev.tflags = get_u16(data + 8);
	ev.structured = data[10] & 1;
	/* Bits 1-2: the metadata contexts selected; bit 3: a client that did
	 * not agree on block sizes (limits.max_request_bytes = 64M). */
	ev.meta = (data[10] >> 1) & 3;
	ev.max_request_bytes = data[10] & 8 ? 64u << 20 : 0;
	data += VIEW_BYTES;
	size -= VIEW_BYTES;

	for (; size >= NBD_REQUEST_SIZE;
	     data += NBD_REQUEST_SIZE, size -= NBD_REQUEST_SIZE) {
		struct nbd_request req;
		uint8_t again[NBD_REQUEST_SIZE];
		const char *why = NULL;

		if (proto_decode_request(data, &req) < 0) {
			FUZZ_CHECK(get_u32(data) != NBD_REQUEST_MAGIC);
			break;
		}
		proto_encode_request(again, &req);
		FUZZ_CHECK(!memcmp(again, data, NBD_REQUEST_SIZE));

		uint32_t err = proto_check_request(&req, &ev, &why);
		if (err) {
			FUZZ_CHECK(why != NULL && *why);
			FUZZ_CHECK(proto_cmd_name(req.type) != NULL);
		} else {
			fuzz_check_passed(&req, &ev);
		}
	}
	return 0;
}
