/*
 * conn.h - one client connection, from the handshake to the close.
 * Lives on a single I/O thread.
 */
#ifndef WBD_CONN_H
#define WBD_CONN_H

#include <stdbool.h>
#include <stdint.h>

struct conn;
struct ioloop;
struct request;

/* Take ownership of an accepted, non-blocking socket (I/O thread). */
void conn_start(struct ioloop *io, int fd, const char *peer);
/* Stop reading requests; close when what is in flight is done. */
void conn_drain(struct conn *c);
/* Close now; requests in flight still complete on the backend. */
void conn_abort(struct conn *c);
struct conn *conn_next(struct conn *c);
struct ioloop *conn_ioloop(struct conn *c);

/* A request's backend work is done: queue its reply (I/O thread). */
void conn_request_done(struct request *req);
/* The same, while the connection is parsing input (no freeing). */
void conn_request_reply_inline(struct request *req);

/* Writer throttling: while any reply is held, the client is not read. */
void conn_throttle_begin(struct conn *c);
void conn_throttle_end(struct conn *c);

/* The export error sequence this connection has seen (errseq). */
uint64_t conn_err_seq(struct conn *c);
void conn_set_err_seq(struct conn *c, uint64_t seq);
/* Has the client ever sent FLUSH (writethrough-until-flush)? */
bool conn_has_flushed(struct conn *c);
void conn_set_flushed(struct conn *c);

#endif
