/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl-client.h - wbctl's side of the control protocol
 * (docs/control-protocol.md): connect to the daemon's Unix socket, send a
 * request as one line of JSON, read the answer lines back.
 *
 * Every function that fails prints one line on stderr ("wbctl: ...") and
 * returns the exit code wbctl should end with (enum wbctl_exit); 0 means
 * success.  Single-threaded; one struct cc_conn per connection.  Prefix
 * cc_ ("control client"), distinct from the daemon's ctl_.
 */
#ifndef WBCTL_CTL_CLIENT_H
#define WBCTL_CTL_CLIENT_H

#include <stddef.h>

#include <jansson.h>

#include "ctl-proto.h"

/* How long to wait for an answer line, unless the caller says otherwise. */
#define CC_TIMEOUT_MS           30000

struct cc_conn {
	int fd;
	const char *path;
	char *buf;                      /* bytes received, not yet a line */
	size_t len, cap;
};

/* Connect to the control socket PATH. */
int cc_open(struct cc_conn *c, const char *path);
void cc_close(struct cc_conn *c);

/* Send REQ as one line, after setting its "v". */
int cc_send(struct cc_conn *c, json_t *req);

/* Read one answer line into *OUT (a new reference to an object), waiting
 * at most TIMEOUT_MS (-1: for ever). */
int cc_read(struct cc_conn *c, int timeout_ms, json_t **out);

/* Called for each progress line of an answer. */
typedef void cc_progress_fn(void *arg, const json_t *line);

/*
 * Send REQ and read its answer: progress lines go to PROGRESS (may be
 * NULL), the final line (the one with "ok") is returned in *ANSWER, also
 * when it reports an error.  Returns 0 if the daemon said "ok": true, else
 * prints the daemon's error and returns the exit code its "code" maps to
 * (cc_exit_code); *ANSWER is NULL only if no final line could be read.
 */
int cc_call(struct cc_conn *c, json_t *req, int timeout_ms,
    cc_progress_fn *progress, void *arg, json_t **answer);

/* The exit code for a daemon error code ("EPERM" -> 4...). */
int cc_exit_code(const char *code);

/* Connect, send {"cmd": CMD}, read the answer and close: the whole of a
 * simple command.  Returns as cc_call. */
int cc_simple(const char *path, const char *cmd, json_t **answer);

#endif
