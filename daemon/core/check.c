/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * check.c - "wbd -n" on this host: the configuration file is valid
 * (config.c); can wbd start with it here?
 *
 * Checked: each local backing file, or for one wbd would create, its
 * directory (exists, and the file or directory can be written when the
 * export is writable); each write log (journal.path, or its file in
 * journal.dir: an existing file or block device wbd may read and write,
 * or a directory in which it may create one, or for journal.dir one it
 * may make; a block device with size 0), each log's state file (a place
 * for it, its directory writable by wbd's user, and what one that exists
 * says, printed on stdout), and, where wbd would create or
 * extend the file to
 * the export's size, that its file system holds a file that large (ext4:
 * 16 TiB); the control socket (another server live on it, its directory
 * missing, control.group unknown); each Unix listener (a live server on
 * it) and TCP listener (the address in use, or a port wbd may not bind).
 * Not checked, because they do not stop wbd from starting or cannot be
 * known before: a remote NBD server (an export waits for one that does
 * not answer), a block device's size, the cache's memory, a port taken
 * between the check and the start.
 *
 * A live server on the control socket is taken for the wbd this file is
 * checked for before a reload: a socket in use is taken to be its own,
 * and everything else is checked.  Run by systemd as ExecStartPre= (a
 * start), a live control socket is an error and the listeners are left
 * to wbd.socket.
 *
 * Each problem is reported as config.c's errors are, "FILE:LINE: KEY:
 * ...", at the line of the setting at fault ("FILE: KEY: ..." for a
 * default, which no line holds).
 *
 * Main thread, before anything starts; nothing is left open or created.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
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
#include "config-load.h"
#include "export-journal.h"
#include "listener.h"
#include "size.h"

/* "wbd: FILE:LINE: " (where AT is written) and the message. */
static void __attribute__((format(printf, 3, 4)))
check_report(const struct wbd_config *cfg, const struct config_where *at,
    const char *fmt, ...)
{
	char where[PATH_MAX + 16];
	va_list ap;

	fprintf(stderr,
	    "wbd: %s: ", config_where_str(cfg, at, where, sizeof where));
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

/*
 * wbd makes export I's local file ec->size_bytes long, creating or
 * extending it sparse: can the file system in DIR hold a file that
 * large?  Tried on a file with no name (O_TMPFILE), gone when closed;
 * where none can be made (no write access, a file system without
 * O_TMPFILE), not checked.
 */
static int
check_size(const struct wbd_config *cfg, size_t i, const char *dir)
{
	const struct export_conf *ec = &cfg->exports[i];
	char want[32];
	int fd, r, err;

	if ((fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0)
		return 0;
	r = ftruncate(fd, (off_t)ec->size_bytes);
	err = errno;
	close(fd);
	if (r == 0 || (err != EFBIG && err != EINVAL))
		return 0;
	check_report(cfg, &ec->size_at,
	    "exports[%zu].size: %s: the file system of %s holds no file this "
	    "large (%s)",
	    i, size_format(ec->size_bytes, want, sizeof want), dir,
	    strerror(err));
	return 1;
}

static int
check_backing(const struct wbd_config *cfg, size_t i)
{
	const struct export_conf *ec = &cfg->exports[i];
	const struct config_where *at = &ec->backing_at;
	char dir[4096];
	struct stat st;

	if (backend_is_uri(ec->backing))
		return 0;
	int want = ec->readonly ? R_OK : R_OK | W_OK;
	check_dirname(ec->backing, dir, sizeof dir);
	if (stat(ec->backing, &st) == 0) {
		if (access(ec->backing, want) < 0) {
			check_report(cfg, at, "exports[%zu].backing: %s: %s", i,
			    ec->backing, strerror(errno));
			return 1;
		}
		if (S_ISREG(st.st_mode) && !ec->readonly &&
		    (uint64_t)st.st_size < ec->size_bytes)
			return check_size(cfg, i, dir);
		return 0;
	}
	if (errno != ENOENT) {
		check_report(cfg, at, "exports[%zu].backing: %s: %s", i,
		    ec->backing, strerror(errno));
		return 1;
	}
	if (ec->readonly || ec->size_bytes == 0) {
		check_report(cfg, at,
		    "exports[%zu].backing: %s does not exist (wbd creates a "
		    "missing file only for a writable export with a size)",
		    i, ec->backing);
		return 1;
	}
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		check_report(cfg, at,
		    "exports[%zu].backing: directory %s does not exist", i,
		    dir);
		return 1;
	}
	if (access(dir, W_OK | X_OK) < 0) {
		check_report(cfg, at,
		    "exports[%zu].backing: cannot create %s in %s: %s", i,
		    ec->backing, dir, strerror(errno));
		return 1;
	}
	return check_size(cfg, i, dir);
}

/*
 * Export I's write log (journal.path, or its file in journal.dir): what
 * wbd opens, or creates, there (journal.dir itself: check_journal_dir).
 */
static int
check_journal(const struct wbd_config *cfg, size_t i)
{
	const struct export_journal_conf *jc = &cfg->exports[i].journal;
	const struct config_where *at = &jc->path_at;
	char key[64], dir[4096];
	struct stat st;

	if (!jc->path)
		return 0;
	/* "exports[1].journal.path: ...", or for a file of journal.dir,
	 * at its line, "journal.dir: exports[1]'s log ...". */
	if (jc->dir)
		snprintf(key, sizeof key, "journal.dir: exports[%zu]'s log", i);
	else
		snprintf(key, sizeof key, "exports[%zu].journal.path:", i);
	if (stat(jc->path, &st) == 0) {
		if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
			check_report(cfg, at,
			    "%s %s is neither a file nor a block device", key,
			    jc->path);
			return 1;
		}
		if (access(jc->path, R_OK | W_OK) < 0) {
			check_report(cfg, at, "%s %s: %s", key, jc->path,
			    strerror(errno));
			return 1;
		}
		return 0;
	}
	if (errno != ENOENT) {
		check_report(cfg, at, "%s %s: %s", key, jc->path,
		    strerror(errno));
		return 1;
	}
	if (jc->size_bytes == 0) {
		check_report(cfg, at,
		    "%s %s does not exist (size 0 uses an existing file or "
		    "block device whole)",
		    key, jc->path);
		return 1;
	}
	if (jc->dir)
		return 0; /* made in journal.dir, checked once */
	check_dirname(jc->path, dir, sizeof dir);
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		check_report(cfg, at, "%s directory %s does not exist", key,
		    dir);
		return 1;
	}
	if (access(dir, W_OK | X_OK) < 0) {
		check_report(cfg, at, "%s cannot create %s in %s: %s", key,
		    jc->path, dir, strerror(errno));
		return 1;
	}
	return 0;
}

/*
 * Whether wbd's user (user and group, else whoever runs this) may create
 * files in DIR: 0 or an errno.  Checked here as root for another user,
 * by DIR's mode bits (ACLs are not read); else by access(2).
 */
static int
check_dir_writable(const struct wbd_config *cfg, const char *dir)
{
	const struct run_as_conf *ra = &cfg->run_as;
	gid_t groups[256];
	int n = (int)(sizeof groups / sizeof groups[0]);
	struct stat st;
	unsigned bits;

	if (!ra->user || geteuid() != 0 || ra->uid == 0)
		return access(dir, W_OK | X_OK) < 0 ? errno : 0;
	if (stat(dir, &st) < 0)
		return errno;
	bool member = st.st_gid == (gid_t)ra->gid;
	if (!member && getgrouplist(ra->user, (gid_t)ra->gid, groups, &n) >= 0)
		for (int g = 0; g < n && !member; g++)
			member = groups[g] == st.st_gid;
	if (st.st_uid == (uid_t)ra->uid)
		bits = st.st_mode >> 6;
	else if (member)
		bits = st.st_mode >> 3;
	else
		bits = st.st_mode;
	return (bits & 3) == 3 ? 0 : EACCES;
}

/* Who wbd runs as, for a message. */
static const char *
check_user(const struct wbd_config *cfg)
{
	return cfg->run_as.user ? cfg->run_as.user : "the user running wbd -n";
}

/*
 * Export I's log's state file (docs/journal.md, "A log that fails"): a
 * place for it (xj_state_path: a block device needs journal.state_dir or
 * journal.dir), a directory there wbd's user may write in (or, for
 * journal.state_dir, may make), and what a state file there says, as a
 * line of the output (a damaged one is a problem: the start would refuse
 * the export).
 */
static int
check_journal_state(const struct wbd_config *cfg, size_t i)
{
	const struct export_journal_conf *jc = &cfg->exports[i].journal;
	const struct config_where *at =
	    jc->state_dir_set ? &jc->state_dir_at : &jc->path_at;
	const char *name = cfg->exports[i].name;
	char state[PATH_MAX], dir[PATH_MAX], hex[2 * JOURNAL_UUID_LEN + 1];
	uint8_t uuid[JOURNAL_UUID_LEN];
	struct journal_peek pk;
	uint64_t below;
	struct stat st;
	int err;

	if (!jc->path)
		return 0;
	int r = xj_state_path(jc, state, sizeof state);
	if (r == -EDESTADDRREQ) {
		check_report(cfg, &jc->path_at,
		    "exports[%zu].journal.path: %s is a block device: its "
		    "state file (written if the log fails) needs "
		    "journal.state_dir, or journal.dir at the top level "
		    "(beside the device node, in /dev, it would not outlive "
		    "a reboot)",
		    i, jc->path);
		return 1;
	}
	if (r < 0) {
		check_report(cfg, &jc->state_dir_at,
		    "exports[%zu].journal.state_dir: the state file of %s: %s",
		    i, jc->path, strerror(-r));
		return 1;
	}
	check_dirname(state, dir, sizeof dir);
	if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
		check_report(cfg, at,
		    "exports[%zu].journal: %s, the directory of its state "
		    "file %s, is not a directory",
		    i, dir, state);
		return 1;
	}
	if (stat(dir, &st) == 0 && (err = check_dir_writable(cfg, dir)) != 0) {
		check_report(cfg, at,
		    "exports[%zu].journal: %s, the directory of its state "
		    "file %s (written if the log fails), is not writable by "
		    "%s: %s",
		    i, dir, state, check_user(cfg), strerror(err));
		return 1;
	}
	if (jc->state_dir_set && stat(dir, &st) < 0) {
		/* Made at the start: its parent must let it. */
		char parent[PATH_MAX];
		check_dirname(dir, parent, sizeof parent);
		if (stat(parent, &st) < 0 || !S_ISDIR(st.st_mode) ||
		    (err = check_dir_writable(cfg, parent)) != 0) {
			check_report(cfg, at,
			    "exports[%zu].journal.state_dir: %s does not "
			    "exist, and %s cannot make it in %s",
			    i, dir, check_user(cfg), parent);
			return 1;
		}
	}
	r = journal_state_peek(state, uuid, &below);
	if (r == 0) {
		printf(
		    "exports[%zu] \"%s\": write log %s: no state file (%s)\n",
		    i, name, jc->path, state);
		return 0;
	}
	if (r < 0) {
		check_report(cfg, at,
		    "exports[%zu].journal: state file %s %s%s: a start "
		    "refuses to replay %s and does not serve the export "
		    "(which of its records are stale cannot be told)",
		    i, state, r == -EINVAL ? "is damaged" : "cannot be read: ",
		    r == -EINVAL ? "" : strerror(-r), jc->path);
		return 1;
	}
	for (unsigned k = 0; k < JOURNAL_UUID_LEN; k++)
		snprintf(hex + 2 * k, 3, "%02x", uuid[k]);
	bool mine = journal_peek(jc->path, state, &pk) == 1 &&
	    memcmp(pk.uuid, uuid, sizeof uuid) == 0;
	printf("exports[%zu] \"%s\": write log %s: state file %s: uuid %s "
	       "(%s), stale_below %llu: %s\n",
	    i, name, jc->path, state, hex, mine ? "the log's" : "not the log's",
	    (unsigned long long)below,
	    mine ? "a start replays none of its records below it, then "
		   "removes it" :
		   "the log was made anew since; a start removes it");
	return 0;
}

/* journal.dir: a directory where wbd may create the exports' logs, or
 * one it may make (the start makes it, 0700, not its parents). */
static int
check_journal_dir(const struct wbd_config *cfg)
{
	const char *dir = cfg->journal.dir;
	const struct config_where *at = &cfg->journal.dir_at;
	char parent[4096];
	struct stat st;

	if (!dir)
		return 0;
	if (stat(dir, &st) == 0) {
		if (!S_ISDIR(st.st_mode)) {
			check_report(cfg, at,
			    "journal.dir: %s is not a directory", dir);
			return 1;
		}
		if (access(dir, W_OK | X_OK) < 0) {
			check_report(cfg, at,
			    "journal.dir: cannot create logs in %s: %s", dir,
			    strerror(errno));
			return 1;
		}
		return 0;
	}
	if (errno != ENOENT) {
		check_report(cfg, at, "journal.dir: %s: %s", dir,
		    strerror(errno));
		return 1;
	}
	check_dirname(dir, parent, sizeof parent);
	if (stat(parent, &st) < 0 || !S_ISDIR(st.st_mode)) {
		check_report(cfg, at,
		    "journal.dir: %s does not exist, nor directory %s to "
		    "make it in",
		    dir, parent);
		return 1;
	}
	if (access(parent, W_OK | X_OK) < 0) {
		check_report(cfg, at, "journal.dir: cannot make %s in %s: %s",
		    dir, parent, strerror(errno));
		return 1;
	}
	return 0;
}

/*
 * A Unix socket path wbd will bind (listen.unix, control.socket), KEY
 * written at AT.  One a live server accepts on is a problem unless
 * LIVE_IS_OURS (the running wbd's, checked before its reload).
 */
static int
check_unix(const struct wbd_config *cfg, const char *key, const char *path,
    const struct config_where *at, bool live_is_ours)
{
	char dir[4096], parent[4096];
	struct stat st;

	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			check_report(cfg, at,
			    "%s: %s exists and is not a socket", key, path);
			return 1;
		}
		if (!live_is_ours && listener_unix_in_use(path)) {
			check_report(cfg, at,
			    "%s: %s is in use by a running server", key, path);
			return 1;
		}
		return 0;
	}
	/* wbd creates the last directory of the path, not more. */
	check_dirname(path, dir, sizeof dir);
	if (stat(dir, &st) < 0 &&
	    stat(check_dirname(dir, parent, sizeof parent), &st) < 0) {
		check_report(cfg, at, "%s: directory %s does not exist", key,
		    parent);
		return 1;
	}
	return 0;
}

/* Where listen.tcp[I] or listen.unix[I] is written; NULL for a default. */
static const struct config_where *
check_listen_at(const struct config_where *v, size_t i)
{
	return v ? &v[i] : NULL;
}

/* Can the address AI of listen.tcp[I] be bound?  1 (reported) if not;
 * one in use is the running wbd's if LIVE_IS_OURS. */
static int
check_bind(const struct wbd_config *cfg, size_t i, const struct addrinfo *ai,
    bool live_is_ours)
{
	const struct config_where *at = check_listen_at(cfg->listen_tcp_at, i);
	const char *spec = cfg->listen_tcp[i];
	int one = 1, r, err;
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return 0;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (ai->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	r = bind(fd, ai->ai_addr, ai->ai_addrlen);
	err = errno;
	close(fd);
	if (r == 0 || (err == EADDRINUSE && live_is_ours))
		return 0;
	if (err == EADDRINUSE)
		check_report(cfg, at,
		    "listen.tcp[%zu]: %s: in use by another server", i, spec);
	else
		check_report(cfg, at, "listen.tcp[%zu]: %s: %s", i, spec,
		    strerror(err));
	return 1;
}

static int
check_tcp(const struct wbd_config *cfg, size_t i, bool live_is_ours)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL, *ai;
	char *host = NULL, *port = NULL;
	int problems = 0;

	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if (config_parse_hostport(cfg->listen_tcp[i], &host, &port) < 0 ||
	    getaddrinfo(*host ? host : NULL, port, &hints, &res) != 0) {
		check_report(cfg, check_listen_at(cfg->listen_tcp_at, i),
		    "listen.tcp[%zu]: %s: cannot resolve", i,
		    cfg->listen_tcp[i]);
		problems = 1;
	}
	for (ai = res; ai && !problems; ai = ai->ai_next)
		problems += check_bind(cfg, i, ai, live_is_ours);
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
	const struct config_where *ctl_at = &cfg->control.socket_at;
	int problems = 0;

	problems += check_journal_dir(cfg);
	for (size_t i = 0; i < cfg->n_exports; i++)
		problems += check_backing(cfg, i) + check_journal(cfg, i) +
		    check_journal_state(cfg, i);
	if (cfg->control.group && !getgrnam(cfg->control.group)) {
		check_report(cfg, &cfg->control.group_at,
		    "control.group: no group \"%s\"", cfg->control.group);
		problems++;
	}
	if (for_start) {
		/* wbd.socket may hold the listeners; the control socket is
		 * wbd's own, and nothing else may hold it. */
		return problems +
		    (ctl ? check_unix(cfg, "control.socket", ctl, ctl_at,
			       false) :
			   0);
	}
	/* A wbd live on the control socket: this is its file, checked
	 * before a reload, and what is in use is in use by it. */
	bool live = ctl && listener_unix_in_use(ctl);
	if (ctl && !live)
		problems +=
		    check_unix(cfg, "control.socket", ctl, ctl_at, false);
	for (size_t i = 0; i < cfg->n_listen_unix; i++) {
		char key[48];
		snprintf(key, sizeof key, "listen.unix[%zu]", i);
		problems += check_unix(cfg, key, cfg->listen_unix[i],
		    check_listen_at(cfg->listen_unix_at, i), live);
	}
	for (size_t i = 0; i < cfg->n_listen_tcp; i++)
		problems += check_tcp(cfg, i, live);
	return problems;
}
