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

#endif
