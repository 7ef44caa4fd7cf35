/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl-client.c - connecting to wbd's control socket and exchanging
 * newline-delimited JSON with it (docs/control-protocol.md).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl-client.h"
#include "wbctl.h"

/* An answer line longer than this is taken for a broken daemon. */
#define CC_MAX_LINE             (64u << 20)

int
cc_open(struct cc_conn *c, const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	memset(c, 0, sizeof *c);
	c->fd = -1;
	c->path = path;
	if (strlen(path) >= sizeof sun.sun_path) {
		wbctl_err("socket path too long: %s", path);
		return WBCTL_EXIT_USAGE;
	}
	strcpy(sun.sun_path, path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd == -1) {
		wbctl_err("socket: %s", strerror(errno));
		return WBCTL_EXIT_UNREACHABLE;
	}
	if (connect(c->fd, (struct sockaddr *)&sun, sizeof sun) == 0)
		return 0;

	int e = errno;
	close(c->fd);
	c->fd = -1;
	if (e == EACCES || e == EPERM) {
		wbctl_err("permission denied connecting to %s (see the "
		    "permissions of the socket, set by control.mode and "
		    "control.group in wbd.conf, and of its directory)", path);
		return WBCTL_EXIT_DENIED;
	}
	wbctl_err("cannot connect: %s: is wbd running? (socket %s)",
	    strerror(e), path);
	return WBCTL_EXIT_UNREACHABLE;
}

void
cc_close(struct cc_conn *c)
{
	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
	c->len = c->cap = 0;
}

/*
 * wbd closed the connection before the request was sent: it may have said
 * why first (a refused client: every slot taken, the limit of its uid).
 * Print that and return the exit code its answer calls for, or 0 if it
 * said nothing.
 */
static int
cc_refused(struct cc_conn *c)
{
	char buf[1024];
	ssize_t n = recv(c->fd, buf, sizeof buf - 1, MSG_DONTWAIT);
	char *nl = n > 0 ? memchr(buf, '\n', (size_t)n) : NULL;

	if (!nl)
		return 0;
	json_t *j = json_loadb(buf, (size_t)(nl - buf), 0, NULL);
	const char *msg = j ? jget_str(j, "error") : NULL;
	int r = 0;
	if (msg && json_is_false(json_object_get(j, "ok"))) {
		wbctl_err("%s", msg);
		r = cc_exit_code(jget_str(j, "code"));
	}
	json_decref(j);
	return r;
}

int
cc_send(struct cc_conn *c, json_t *req)
{
	json_object_set_new(req, "v", json_integer(CTL_PROTOCOL_VERSION));
	char *s = json_dumps(req, JSON_COMPACT);
	if (!s) {
		wbctl_err("cannot encode the request: out of memory");
		return WBCTL_EXIT_FAILED;
	}
	size_t n = strlen(s), off = 0;
	/* The line's newline goes out in a second piece. */
	while (off <= n) {
		const char *p = off < n ? s + off : "\n";
		size_t want = off < n ? n - off : 1;
		ssize_t r = send(c->fd, p, want, MSG_NOSIGNAL);
		if (r == -1) {
			if (errno == EINTR)
				continue;
			int e = errno, why = cc_refused(c);
			free(s);
			if (why)
				return why;
			wbctl_err("lost the connection to wbd (socket %s): %s",
			    c->path, strerror(e));
			return WBCTL_EXIT_UNREACHABLE;
		}
		off += (size_t)r;
	}
	free(s);
	return 0;
}

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for more bytes.  Returns 0, or an exit code. */
static int
cc_fill(struct cc_conn *c, long long deadline, int timeout_ms)
{
	if (c->cap - c->len < 4096) {
		size_t cap = c->cap ? c->cap * 2 : 16384;
		char *b = realloc(c->buf, cap);
		if (!b) {
			wbctl_err("out of memory");
			return WBCTL_EXIT_FAILED;
		}
		c->buf = b;
		c->cap = cap;
	}
	for (;;) {
		int wait = -1;
		if (deadline >= 0) {
			long long left = deadline - now_ms();
			if (left <= 0) {
				wbctl_err("no answer from wbd within %d s "
				    "(socket %s)", timeout_ms / 1000,
				    c->path);
				return WBCTL_EXIT_PROTOCOL;
			}
			wait = (int)left;
		}
		struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
		int r = poll(&pfd, 1, wait);
		if (r == -1 && errno == EINTR)
			return -1;      /* the caller decides */
		if (r <= 0)
			continue;
		ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
		if (n == -1 && errno == EINTR)
			return -1;
		if (n == -1) {
			wbctl_err("lost the connection to wbd (socket %s): %s",
			    c->path, strerror(errno));
			return WBCTL_EXIT_UNREACHABLE;
		}
		if (n == 0) {
			wbctl_err("wbd closed the connection without a "
			    "complete answer (socket %s)", c->path);
			return WBCTL_EXIT_PROTOCOL;
		}
		c->len += (size_t)n;
		return 0;
	}
}

int
cc_read(struct cc_conn *c, int timeout_ms, json_t **out)
{
	long long deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	char *nl;
	size_t scanned = 0;

	*out = NULL;
	while (!(nl = c->len ? memchr(c->buf + scanned, '\n',
	    c->len - scanned) : NULL)) {
		scanned = c->len;
		if (c->len > CC_MAX_LINE) {
			wbctl_err("protocol error: an answer line longer "
			    "than %u MiB", CC_MAX_LINE >> 20);
			return WBCTL_EXIT_PROTOCOL;
		}
		int r = cc_fill(c, deadline, timeout_ms);
		if (r == -1)
			return -1;      /* interrupted by a signal */
		if (r)
			return r;
	}

	size_t linelen = (size_t)(nl - c->buf);
	json_error_t je;
	json_t *j = json_loadb(c->buf, linelen, 0, &je);
	memmove(c->buf, nl + 1, c->len - linelen - 1);
	c->len -= linelen + 1;
	if (!j) {
		wbctl_err("protocol error: wbd's answer is not JSON: %s",
		    je.text);
		return WBCTL_EXIT_PROTOCOL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		wbctl_err("protocol error: wbd's answer is not a JSON object");
		return WBCTL_EXIT_PROTOCOL;
	}
	*out = j;
	return 0;
}

int
cc_exit_code(const char *code)
{
	static const struct {
		const char *code;
		int exit;
	} map[] = {
		{ "EPERM", WBCTL_EXIT_DENIED },
		{ "EACCES", WBCTL_EXIT_DENIED },
		{ "EINVAL", WBCTL_EXIT_INVALID },
		{ "EPROTO", WBCTL_EXIT_PROTOCOL },
	};

	for (size_t i = 0; code && i < sizeof map / sizeof map[0]; i++)
		if (strcmp(code, map[i].code) == 0)
			return map[i].exit;
	return WBCTL_EXIT_FAILED;
}

int
cc_call(struct cc_conn *c, json_t *req, int timeout_ms,
    cc_progress_fn *progress, void *arg, json_t **answer)
{
	const char *cmd = jget_str(req, "cmd");
	int r;

	*answer = NULL;
	if ((r = cc_send(c, req)))
		return r;
	for (;;) {
		json_t *line;
		do
			r = cc_read(c, timeout_ms, &line);
		while (r == -1);
		if (r)
			return r;
		json_t *ok = json_object_get(line, "ok");
		if (ok) {
			*answer = line;
			if (json_is_true(ok))
				return 0;
			if (!json_is_false(ok)) {
				wbctl_err("protocol error: \"ok\" is not "
				    "true or false");
				return WBCTL_EXIT_PROTOCOL;
			}
			const char *code = jget_str(line, "code");
			const char *msg = jget_str(line, "error");
			if (msg && *msg)
				wbctl_err("%s: %s", cmd ? cmd : "request", msg);
			else
				wbctl_err("%s: failed (%s)", cmd ? cmd :
				    "request", code ? code : "no error code");
			return cc_exit_code(code);
		}
		if (!json_object_get(line, "progress")) {
			json_decref(line);
			wbctl_err("protocol error: an answer line with neither "
			    "\"ok\" nor \"progress\"");
			return WBCTL_EXIT_PROTOCOL;
		}
		if (progress)
			progress(arg, line);
		json_decref(line);
	}
}

int
cc_simple(const char *path, const char *cmd, json_t **answer)
{
	struct cc_conn c;
	int r;

	*answer = NULL;
	if ((r = cc_open(&c, path)))
		return r;
	json_t *req = json_pack("{s:s}", "cmd", cmd);
	r = cc_call(&c, req, CC_TIMEOUT_MS, NULL, NULL, answer);
	json_decref(req);
	cc_close(&c);
	return r;
}
