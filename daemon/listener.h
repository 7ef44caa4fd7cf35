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

/*
 * Bind and listen on a Unix socket at PATH, refusing a path a live server
 * owns and replacing a stale socket file.  MODE >= 0 sets the file's mode
 * at bind time.  Returns the non-blocking socket, or -1 after logging
 * (WHAT names it in messages).
 */
int unix_listen(const char *path, const char *what, int mode);

#endif
