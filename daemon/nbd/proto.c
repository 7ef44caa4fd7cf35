/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * proto.c - NBD transmission-phase encoding and request validation.
 *
 * Every request is checked here, in one function, before anything acts on
 * it; the connection code only carries out what passed.
 */
#include <errno.h>

#include "buf.h"
#include "proto.h"

int
proto_decode_request(const uint8_t *p, struct nbd_request *req)
{
	if (get_u32(p) != NBD_REQUEST_MAGIC)
		return -1;
	req->flags = get_u16(p + 4);
	req->type = get_u16(p + 6);
	req->cookie = get_u64(p + 8);
	req->offset = get_u64(p + 16);
	req->count = get_u32(p + 24);
	return 0;
}

void
proto_encode_request(uint8_t *p, const struct nbd_request *req)
{
	put_u32(p, NBD_REQUEST_MAGIC);
	put_u16(p + 4, req->flags);
	put_u16(p + 6, req->type);
	put_u64(p + 8, req->cookie);
	put_u64(p + 16, req->offset);
	put_u32(p + 24, req->count);
}

/* Flags each command accepts, given what was advertised. */
static uint16_t
proto_allowed_flags(uint16_t type, uint16_t tflags, bool structured)
{
	/* With SEND_FUA advertised, the spec has the server accept FUA on
	 * every command, even where it means nothing (READ, FLUSH, DISC). */
	uint16_t fua = (tflags & NBD_FLAG_SEND_FUA) ? NBD_CMD_FLAG_FUA : 0;

	switch (type) {
	case NBD_CMD_READ:
		/* DF is not advertised; REQ_ONE applies to BLOCK_STATUS. */
		(void)structured;
		return fua;
	case NBD_CMD_WRITE:
	case NBD_CMD_TRIM:
	case NBD_CMD_FLUSH:
	case NBD_CMD_DISC:
	case NBD_CMD_CACHE:
		return fua;
	case NBD_CMD_WRITE_ZEROES:
		return fua | NBD_CMD_FLAG_NO_HOLE |
		    ((tflags & NBD_FLAG_SEND_FAST_ZERO) ? NBD_CMD_FLAG_FAST_ZERO : 0);
	case NBD_CMD_BLOCK_STATUS:
		return fua | NBD_CMD_FLAG_REQ_ONE;
	default:
		return 0;
	}
}

uint32_t
proto_check_request(const struct nbd_request *req,
    const struct proto_export_view *ev, const char **why)
{
	bool ro = ev->tflags & NBD_FLAG_READ_ONLY;
	uint16_t allowed =
	    proto_allowed_flags(req->type, ev->tflags, ev->structured);
	const char *dummy;

	if (!why)
		why = &dummy;

	switch (req->type) {
	case NBD_CMD_READ:
	case NBD_CMD_WRITE:
	case NBD_CMD_TRIM:
	case NBD_CMD_WRITE_ZEROES:
	case NBD_CMD_CACHE:
		break;
	case NBD_CMD_FLUSH:
		if (req->flags & ~allowed) {
			*why = "flags on FLUSH";
			return NBD_EINVAL;
		}
		if (req->offset || req->count) {
			*why = "FLUSH with non-zero offset or length";
			return NBD_EINVAL;
		}
		return 0;
	case NBD_CMD_DISC:
		if (req->flags & ~allowed) {
			*why = "flags on DISC";
			return NBD_EINVAL;
		}
		return 0;
	case NBD_CMD_BLOCK_STATUS:
		if (!ev->structured || !ev->meta) {
			*why =
			    "BLOCK_STATUS without a metadata context selected";
			return NBD_EINVAL;
		}
		break;
	default:
		*why = "unknown command";
		return NBD_EINVAL;
	}

	if (req->flags & ~allowed) {
		*why = "unknown or inapplicable command flag";
		return NBD_EINVAL;
	}
	if (req->count == 0) {
		*why = "zero length";
		return NBD_EINVAL;
	}
	/* Only READ and WRITE carry a payload: the others' lengths are
	 * not limited by the maximum. */
	uint32_t max = ev->max_request_bytes;
	if (max == 0)
		max = PROTO_MAX_REQUEST_BYTES;
	if (req->count > max &&
	    (req->type == NBD_CMD_READ || req->type == NBD_CMD_WRITE)) {
		*why = max == PROTO_MAX_REQUEST_BYTES ?
		    "request larger than the maximum block size" :
		    "request larger than limits.max_request_bytes";
		return NBD_EINVAL;
	}
	bool writes = req->type == NBD_CMD_WRITE || req->type == NBD_CMD_TRIM ||
	    req->type == NBD_CMD_WRITE_ZEROES;
	if (writes && ro) {
		*why = "write to a read-only export";
		return NBD_EPERM;
	}
	if (req->offset > ev->size_bytes ||
	    req->count > ev->size_bytes - req->offset) {
		*why = "request beyond the end of the export";
		return writes ? NBD_ENOSPC : NBD_EINVAL;
	}
	return 0;
}

size_t
proto_block_status_bytes(uint32_t n_extents)
{
	return NBD_STRUCTURED_REPLY_SIZE + 4 + 8 * (size_t)n_extents;
}

size_t
proto_encode_block_status(uint8_t *p, uint64_t cookie, bool done,
    uint32_t context_id, const struct proto_extent *e, uint32_t n)
{
	proto_encode_structured_hdr(p, done ? NBD_REPLY_FLAG_DONE : 0,
	    NBD_REPLY_TYPE_BLOCK_STATUS, cookie, 4 + 8 * n);
	p += NBD_STRUCTURED_REPLY_SIZE;
	put_u32(p, context_id);
	for (uint32_t i = 0; i < n; i++) {
		put_u32(p + 4 + 8 * i, e[i].length);
		put_u32(p + 8 + 8 * i, e[i].flags);
	}
	return proto_block_status_bytes(n);
}

void
proto_encode_simple_reply(uint8_t *p, uint64_t cookie, uint32_t nbd_err)
{
	put_u32(p, NBD_SIMPLE_REPLY_MAGIC);
	put_u32(p + 4, nbd_err);
	put_u64(p + 8, cookie);
}

void
proto_encode_structured_hdr(uint8_t *p, uint16_t flags, uint16_t type,
    uint64_t cookie, uint32_t length)
{
	put_u32(p, NBD_STRUCTURED_REPLY_MAGIC);
	put_u16(p + 4, flags);
	put_u16(p + 6, type);
	put_u64(p + 8, cookie);
	put_u32(p + 16, length);
}

uint32_t
proto_errno_to_nbd(int err)
{
	switch (err) {
	case 0:
		return NBD_SUCCESS;
	case EROFS:
	case EPERM:
	case EACCES:
		return NBD_EPERM;
	case ENOMEM:
		return NBD_ENOMEM;
	case EINVAL:
		return NBD_EINVAL;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		return NBD_ENOSPC;
	case EOVERFLOW:
		return NBD_EOVERFLOW;
	case ENOTSUP:
#if EOPNOTSUPP != ENOTSUP
	case EOPNOTSUPP:
#endif
		return NBD_ENOTSUP;
	case ESHUTDOWN:
		return NBD_ESHUTDOWN;
	default:
		return NBD_EIO;
	}
}

const char *
proto_cmd_name(uint16_t type)
{
	switch (type) {
	case NBD_CMD_READ: return "READ";
	case NBD_CMD_WRITE: return "WRITE";
	case NBD_CMD_DISC: return "DISC";
	case NBD_CMD_FLUSH: return "FLUSH";
	case NBD_CMD_TRIM: return "TRIM";
	case NBD_CMD_CACHE: return "CACHE";
	case NBD_CMD_WRITE_ZEROES: return "WRITE_ZEROES";
	case NBD_CMD_BLOCK_STATUS: return "BLOCK_STATUS";
	default: return "UNKNOWN";
	}
}
