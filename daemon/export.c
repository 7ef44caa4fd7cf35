/*
 * export.c - exports and the execution of their requests on the backing
 * device.  export_submit() runs on an I/O thread; export_run() on a worker
 * of the export's writeback device.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "export.h"
#include "log.h"
#include "proto.h"
#include "request.h"
#include "wbdev.h"

struct export *
export_new(const struct export_conf *ec, struct wb_dev *dev, struct backend *b)
{
	struct export *e = calloc(1, sizeof *e);

	if (!e)
		return NULL;
	e->name = strdup(ec->name);
	e->description = ec->description ? strdup(ec->description) : NULL;
	if (!e->name || (ec->description && !e->description)) {
		free(e->name);
		free(e->description);
		free(e);
		return NULL;
	}
	e->backend = b;
	e->dev = dev;
	e->size_bytes = b->ops->size(b);
	e->cache_mode = ec->cache_mode;

	e->tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH |
	    NBD_FLAG_SEND_FUA | NBD_FLAG_CAN_MULTI_CONN;
	if (ec->readonly || (b->caps & BACKEND_READ_ONLY)) {
		e->tflags |= NBD_FLAG_READ_ONLY;
	} else {
		if (b->caps & BACKEND_CAN_TRIM)
			e->tflags |= NBD_FLAG_SEND_TRIM;
		if (b->caps & BACKEND_CAN_ZERO)
			e->tflags |= NBD_FLAG_SEND_WRITE_ZEROES;
		if (b->caps & BACKEND_CAN_FAST_ZERO)
			e->tflags |= NBD_FLAG_SEND_FAST_ZERO;
	}
	if (b->caps & BACKEND_ROTATIONAL)
		e->tflags |= NBD_FLAG_ROTATIONAL;

	e->hs.name = e->name;
	e->hs.description = e->description;
	e->hs.size_bytes = e->size_bytes;
	e->hs.tflags = e->tflags;
	e->hs.max_block_bytes = PROTO_MAX_REQUEST_BYTES;
	dev->n_exports++;
	return e;
}

void
export_free(struct export *e)
{
	if (!e)
		return;
	backend_close(e->backend);
	free(e->name);
	free(e->description);
	free(e);
}

/* On a worker: carry out the request against the backend. */
static void
export_run(struct job *job)
{
	struct request *req = container_of(job, struct request, job);
	struct export *e = req->export;
	struct backend *b = e->backend;
	const struct nbd_request *n = &req->nbd;
	bool fua = n->flags & NBD_CMD_FLAG_FUA;
	int r;

	switch (n->type) {
	case NBD_CMD_READ:
		r = b->ops->pread(b, req->data, n->count, n->offset);
		break;
	case NBD_CMD_WRITE:
		r = b->ops->pwrite(b, req->data, n->count, n->offset);
		break;
	case NBD_CMD_FLUSH:
		r = b->ops->flush(b);
		break;
	case NBD_CMD_TRIM:
		r = b->ops->trim(b, n->count, n->offset);
		break;
	case NBD_CMD_WRITE_ZEROES:
		r = b->ops->zero(b, n->count, n->offset,
		    !(n->flags & NBD_CMD_FLAG_NO_HOLE),
		    n->flags & NBD_CMD_FLAG_FAST_ZERO);
		break;
	default:
		r = -EINVAL;    /* validation lets nothing else through */
		break;
	}
	if (r == 0 && fua)
		r = b->ops->flush(b);
	req->err = -r;
}

static void
export_done(struct job *job)
{
	conn_request_done(container_of(job, struct request, job));
}

void
export_submit(struct export *e, struct request *req)
{
	req->job.run = export_run;
	req->job.done = export_done;
	req->job.owner = conn_ioloop(req->conn);
	req->export = e;
	pool_submit(e->dev->pool, &req->job);
}
