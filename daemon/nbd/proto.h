/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * proto.h - the NBD transmission phase on the wire: decoding requests,
 * validating them against an export, encoding replies, and the one place
 * where an errno becomes an NBD error.  Pure functions, any thread.
 */
#ifndef WBD_PROTO_H
#define WBD_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nbd-proto.h"

/* The largest READ or WRITE advertised (the maximum block size), and
 * the most a client that agreed on block sizes may send. */
#define PROTO_MAX_REQUEST_BYTES     (32u << 20)
/* A WRITE whose payload is larger than this, or than twice the view's
 * max_request_bytes, is not even read: disconnect. */
#define PROTO_MAX_DISCARD_BYTES     (64u << 20)

struct nbd_request {
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint64_t offset;
	uint32_t count;
};

/* What validation needs to know of the export and the connection. */
struct proto_export_view {
	uint64_t size_bytes;
	uint16_t tflags;            /* transmission flags advertised */
	bool structured;            /* structured replies negotiated */
	unsigned meta;              /* metadata contexts selected (meta.h) */
	/* The longest READ or WRITE accepted: PROTO_MAX_REQUEST_BYTES for a
	 * client that agreed on block sizes, else limits.max_request_bytes
	 * (0: PROTO_MAX_REQUEST_BYTES). */
	uint32_t max_request_bytes;
};

/* A refused WRITE's payload up to this long is read and dropped. */
static inline uint64_t
proto_max_discard_bytes(const struct proto_export_view *ev)
{
	uint64_t twice = 2 * (uint64_t)ev->max_request_bytes;

	return twice > PROTO_MAX_DISCARD_BYTES ? twice :
						 PROTO_MAX_DISCARD_BYTES;
}

/* Decode 28 bytes; returns -1 on a bad magic (the stream is lost). */
int proto_decode_request(const uint8_t *p, struct nbd_request *req);

/* How many payload bytes follow the header on the wire. */
static inline uint32_t
proto_payload_bytes(const struct nbd_request *req)
{
	return req->type == NBD_CMD_WRITE ? req->count : 0;
}

/*
 * Validate REQ.  Returns 0 if it may be carried out, otherwise the NBD error
 * to reply with; *WHY is set to a short reason for the log.
 */
uint32_t proto_check_request(const struct nbd_request *req,
    const struct proto_export_view *ev, const char **why);

void proto_encode_request(uint8_t *p, const struct nbd_request *req);
void proto_encode_simple_reply(uint8_t *p, uint64_t cookie, uint32_t nbd_err);
void proto_encode_structured_hdr(uint8_t *p, uint16_t flags, uint16_t type,
    uint64_t cookie, uint32_t length);

/* One extent of a block status reply. */
struct proto_extent {
	uint32_t length;
	uint32_t flags;
};

/* The size of a block status chunk of N extents, header included. */
size_t proto_block_status_bytes(uint32_t n_extents);
/* Encode one NBD_REPLY_TYPE_BLOCK_STATUS chunk of N (>= 1) extents for
 * context CONTEXT_ID at P; DONE: the last chunk.  Returns its size. */
size_t proto_encode_block_status(uint8_t *p, uint64_t cookie, bool done,
    uint32_t context_id, const struct proto_extent *e, uint32_t n);

/* errno (positive) to NBD error: the only place this mapping lives. */
uint32_t proto_errno_to_nbd(int err);

const char *proto_cmd_name(uint16_t type);

#endif
