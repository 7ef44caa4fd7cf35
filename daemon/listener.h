/*
 * listener.h - listening sockets (TCP and Unix) on the main thread's loop.
 * Accepted connections are handed to the I/O threads.
 */
#ifndef WBD_LISTENER_H
#define WBD_LISTENER_H

struct daemon;

/* Bind every listener of the configuration; -1 after logging why. */
int listeners_open(struct daemon *d);
void listeners_start(struct daemon *d);
/* Stop accepting, close the sockets and remove Unix socket files. */
void listeners_close(struct daemon *d);

#endif
