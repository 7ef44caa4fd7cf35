/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tls.h - TLS on the serving side (NBD_OPT_STARTTLS), through GnuTLS.
 *
 * Credentials (X.509 certificates in nbdkit's and qemu's directory layout,
 * or a PSK file of "username:hexkey" lines as psktool writes them) are
 * loaded whole and checked before use; a loaded set is immutable and
 * reference-counted, so a reload can swap in a new one while connections
 * still use the old.  A session is driven without blocking: every call
 * returns TLS_AGAIN rather than wait, and says which way it waits.
 */
#ifndef WBD_TLS_H
#define WBD_TLS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "config.h" /* struct tls_conf, enum tls_mode */

#define TLS_MAX_IDENT 256 /* a PSK username or certificate CN */

struct tls_creds;

/* Load and check what TC names; NULL with a message in ERR if it cannot be
 * used (a missing file, a key that does not match its certificate, a bad
 * PSK line, a bad priority string). */
struct tls_creds *
tls_creds_load(const struct tls_conf *tc, char *err, size_t errlen);
void tls_creds_unref(struct tls_creds *cr);

/* The server's TLS mode and credentials now; any thread. */
struct tls_server {
	pthread_mutex_t lock;
	enum tls_mode mode;
	struct tls_creds *creds; /* NULL when off */
};

void tls_server_init(struct tls_server *ts);
/* Install MODE and CR (whose reference it takes); the old credentials go
 * when their last session does. */
void
tls_server_set(struct tls_server *ts, enum tls_mode mode, struct tls_creds *cr);
/* The mode, and a reference to the credentials (NULL when off). */
enum tls_mode tls_server_get(struct tls_server *ts, struct tls_creds **cr);
void tls_server_destroy(struct tls_server *ts);

enum tls_step {
	TLS_DONE,
	TLS_AGAIN, /* wait for the socket: tls_wants_write() says how */
	TLS_FAILED,
};

struct tls_session;

/*
 * A server session on the non-blocking socket FD, holding a reference to
 * CR.  PRE is what was already read from the socket past the STARTTLS
 * option (the start of the client's handshake): TLS reads it first.
 * NULL if out of memory.
 */
struct tls_session *
tls_session_new(struct tls_creds *cr, int fd, const void *pre, size_t prelen);
void tls_session_free(struct tls_session *s);

/* The TLS handshake, a step at a time; on TLS_FAILED, ERR says why. */
enum tls_step tls_handshake(struct tls_session *s, char *err, size_t errlen);
/* Does the last TLS_AGAIN (or -1 with EAGAIN) wait to write? */
bool tls_wants_write(struct tls_session *s);

/* Like read(): bytes, 0 at the peer's end, or -1 with errno (EAGAIN). */
ssize_t tls_recv(struct tls_session *s, void *buf, size_t len);
/* Like writev(): bytes taken, or -1 with errno (EAGAIN).  After EAGAIN,
 * call again with the same data first. */
ssize_t tls_writev(struct tls_session *s, const struct iovec *iov, int n);
/* Decrypted bytes waiting that no socket event will announce. */
bool tls_pending(struct tls_session *s);
/* Say goodbye without waiting. */
void tls_bye(struct tls_session *s);

/* The PSK username the client used, or NULL. */
const char *tls_session_psk(struct tls_session *s);
/* The common name of the client's verified certificate, or false. */
bool tls_session_cn(struct tls_session *s, char *buf, size_t len);
/* "TLS1.3/AES-256-GCM", for the log. */
void tls_session_describe(struct tls_session *s, char *buf, size_t len);

const char *tls_mode_name(enum tls_mode m);

#endif
