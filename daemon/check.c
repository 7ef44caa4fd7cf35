/*
 * check.c - "wbd -n" on this host: the configuration file is valid
 * (config.c); can wbd start with it here?
 *
 * Checked: each local backing file, or for one wbd would create, its
 * directory (exists, and the file or directory can be written when the
 * export is writable); the control socket (another server live on it, its
 * directory missing, control.group unknown); each Unix listener (a live
 * server on it) and TCP listener (the address in use, or a port wbd may
 * not bind).  Not checked, because they do not stop wbd from starting or
 * cannot be known before: a remote NBD server (an export waits for one
 * that does not answer), a block device's size, the cache's memory, a
 * port taken between the check and the start.
 *
 * A live server on the control socket is taken for the wbd this file is
 * checked for before a reload: its sockets are not checked then (a note
 * says so).  Run by systemd as ExecStartPre= (a start), a live control
 * socket is an error and the listeners are left to wbd.socket.
 *
 * Main thread, before anything starts; nothing is left open or created.
 */
#include <errno.h>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"
#include "listener.h"

static void __attribute__((format(printf, 3, 4)))
check_report(const struct wbd_config *cfg, int line, const char *fmt, ...)
{
	va_list ap;

	if (line > 0)
		fprintf(stderr, "wbd: %s:%d: ", cfg->path, line);
	else
		fprintf(stderr, "wbd: %s: ", cfg->path);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* The directory of PATH, in BUF ("." for a bare name). */
static const char *
check_dirname(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(buf, len, ".");
	else if (slash == path)
		snprintf(buf, len, "/");
	else
		snprintf(buf, len, "%.*s", (int)(slash - path), path);
	return buf;
}

static int
check_backing(const struct wbd_config *cfg, size_t i)
{
	const struct export_conf *ec = &cfg->exports[i];
	char dir[4096];
	struct stat st;

	if (backend_is_uri(ec->backing))
		return 0;
	int want = ec->readonly ? R_OK : R_OK | W_OK;
	if (stat(ec->backing, &st) == 0) {
		if (access(ec->backing, want) < 0) {
			check_report(cfg, ec->line,
			    "exports[%zu].backing: %s: "
			    "%s",
			    i, ec->backing, strerror(errno));
			return 1;
		}
		return 0;
	}
	if (errno != ENOENT) {
		check_report(cfg, ec->line, "exports[%zu].backing: %s: %s", i,
		    ec->backing, strerror(errno));
		return 1;
	}
	if (ec->readonly || ec->size_bytes == 0) {
		check_report(cfg, ec->line,
		    "exports[%zu].backing: %s does not "
		    "exist (wbd creates a missing file only for a writable "
		    "export with a size)",
		    i, ec->backing);
		return 1;
	}
	check_dirname(ec->backing, dir, sizeof dir);
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		check_report(cfg, ec->line,
		    "exports[%zu].backing: directory %s "
		    "does not exist",
		    i, dir);
		return 1;
	}
	if (access(dir, W_OK | X_OK) < 0) {
		check_report(cfg, ec->line,
		    "exports[%zu].backing: cannot create "
		    "%s in %s: %s",
		    i, ec->backing, dir, strerror(errno));
		return 1;
	}
	return 0;
}

/* A Unix socket path wbd will bind (listen.unix, control.socket). */
static int
check_unix(const struct wbd_config *cfg, const char *key, const char *path)
{
	char dir[4096], parent[4096];
	struct stat st;

	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			check_report(cfg, 0,
			    "%s: %s exists and is not a socket", key, path);
			return 1;
		}
		if (listener_unix_in_use(path)) {
			check_report(cfg, 0,
			    "%s: %s is in use by a running "
			    "server",
			    key, path);
			return 1;
		}
		return 0;
	}
	/* wbd creates the last directory of the path, not more. */
	check_dirname(path, dir, sizeof dir);
	if (stat(dir, &st) < 0 &&
	    stat(check_dirname(dir, parent, sizeof parent), &st) < 0) {
		check_report(cfg, 0, "%s: directory %s does not exist", key,
		    parent);
		return 1;
	}
	return 0;
}

/* Can the address AI be bound?  1 (reported) if not. */
static int
check_bind(const struct wbd_config *cfg, size_t i, const struct addrinfo *ai)
{
	const char *spec = cfg->listen_tcp[i];
	int one = 1, r;
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return 0;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (ai->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	r = bind(fd, ai->ai_addr, ai->ai_addrlen);
	if (r < 0 && errno == EADDRINUSE)
		check_report(cfg, 0,
		    "listen.tcp[%zu]: %s: in use by another "
		    "server",
		    i, spec);
	else if (r < 0)
		check_report(cfg, 0, "listen.tcp[%zu]: %s: %s", i, spec,
		    strerror(errno));
	close(fd);
	return r < 0;
}

static int
check_tcp(const struct wbd_config *cfg, size_t i)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL, *ai;
	char *host = NULL, *port = NULL;
	int problems = 0;

	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if (config_parse_hostport(cfg->listen_tcp[i], &host, &port) < 0 ||
	    getaddrinfo(*host ? host : NULL, port, &hints, &res) != 0) {
		check_report(cfg, 0, "listen.tcp[%zu]: %s: cannot resolve", i,
		    cfg->listen_tcp[i]);
		problems = 1;
	}
	for (ai = res; ai && !problems; ai = ai->ai_next)
		problems += check_bind(cfg, i, ai);
	if (res)
		freeaddrinfo(res);
	free(host);
	free(port);
	return problems;
}

int
check_host(const struct wbd_config *cfg, bool for_start)
{
	const char *ctl = cfg->control.socket;
	int problems = 0;

	for (size_t i = 0; i < cfg->n_exports; i++)
		problems += check_backing(cfg, i);
	if (cfg->control.group && !getgrnam(cfg->control.group)) {
		check_report(cfg, 0, "control.group: no group \"%s\"",
		    cfg->control.group);
		problems++;
	}
	if (for_start) {
		/* wbd.socket may hold the listeners; the control socket is
		 * wbd's own, and nothing else may hold it. */
		return problems +
		    (ctl ? check_unix(cfg, "control.socket", ctl) : 0);
	}
	if (ctl && listener_unix_in_use(ctl)) {
		fprintf(stderr,
		    "wbd: note: a wbd runs on control.socket %s: "
		    "the sockets are taken to be its own (a check "
		    "before a reload) and not checked\n",
		    ctl);
		return problems;
	}
	if (ctl)
		problems += check_unix(cfg, "control.socket", ctl);
	for (size_t i = 0; i < cfg->n_listen_unix; i++) {
		char key[48];
		snprintf(key, sizeof key, "listen.unix[%zu]", i);
		problems += check_unix(cfg, key, cfg->listen_unix[i]);
	}
	for (size_t i = 0; i < cfg->n_listen_tcp; i++)
		problems += check_tcp(cfg, i);
	return problems;
}
