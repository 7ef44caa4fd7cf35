/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * config.c - wbd.conf: filling a struct wbd_config from it, the top level.
 *
 * It owns config_load() and the file's top level: which groups exist and
 * the order they are read in (cfg_read), the user and group wbd runs as,
 * the defaults and config_free(), where a key is written (cfg_at) for
 * later messages, and the checks made once every group is read (a
 * TLS-only export needs TLS on; which listeners are open to all).  The
 * reading itself (errors with file and line, unknown keys, typed getters)
 * is cfgread.c's; the groups of the settings table are read by
 * config-walk.c, the listeners by config-listen.c, the exports and the
 * journal group by config-export.c.  It runs on the main thread at
 * start-up, or on the thread that reloads, and keeps no state between
 * calls: everything lives in a struct cfg_load on the stack of
 * config_load().
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libconfig.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "access.h"
#include "budget.h"
#include "cfgread.h"
#include "config-internal.h"
#include "config-load.h"
#include "log.h"
#include "settings.h"

_Static_assert(LIMITS_DEFAULT_INFLIGHT_BYTES == BUDGET_DEFAULT_BYTES &&
	LIMITS_MIN_INFLIGHT_BYTES == BUDGET_MIN_BYTES &&
	LIMITS_MAX_INFLIGHT_BYTES == BUDGET_MAX_BYTES,
    "limits.max_inflight_bytes is the memory budget's");
_Static_assert(LIMITS_DEFAULT_CLIENT_SHARE == BUDGET_DEFAULT_SHARE_PCT &&
	LIMITS_MIN_CLIENT_SHARE == BUDGET_MIN_SHARE_PCT &&
	LIMITS_MAX_CLIENT_SHARE == BUDGET_MAX_SHARE_PCT,
    "limits.max_client_share is the memory budget's");

/* Where S is written: its file, as an index of the files libconfig read
 * (cfg->files, see cfg_files), and its line; { 0, 0 } for NULL. */
struct config_where
cfg_at(const struct cfg_load *ld, const config_setting_t *s)
{
	struct config_where at = { 0, 0 };
	const char *file;

	if (s == NULL)
		return at;
	at.line = config_setting_source_line(s);
	file = config_setting_source_file(s);
	for (unsigned i = 0; file != NULL && i < ld->lc.num_filenames; i++)
		if (strcmp(ld->lc.filenames[i], file) == 0) {
			at.file = i;
			break;
		}
	return at;
}

/* user = "wbd"; group = "wbd"; (top level): who wbd runs as once
 * started. */
static int
cfg_run_as(struct cfg_load *ld, const config_setting_t *root,
    struct run_as_conf *ra)
{
	config_setting_t *s;
	const char *str;
	uint32_t gid;
	int r;

	if ((r = cfg_string(ld, root, "user", CFG_MAX("", "user"), &str)) == -1)
		return -1;
	if (r == 1) {
		s = config_setting_get_member(root, "user");
		if ((r = access_user_ids(str, &ra->uid, &ra->gid)) != 0) {
			cfg_error(ld, s,
			    r == ENOENT ? "expected a known user, "
					  "got \"%s\": no such user" :
					  "cannot look up user "
					  "\"%s\": %s",
			    str, strerror(r));
			return -1;
		}
		if (cfg_strdup(ld, str, &ra->user) == -1)
			return -1;
	}
	if ((r = cfg_group_name(ld, root, "group", &ra->group, &gid)) != 1)
		return r;
	if (!ra->user) {
		cfg_error(ld, config_setting_get_member(root, "group"),
		    "expected user = \"...\" with group: wbd changes to a user "
		    "and that group together");
		return -1;
	}
	ra->gid = gid;
	return 0;
}

/* The files libconfig read, for the messages of later checks (cfg_at). */
static int
cfg_files(struct cfg_load *ld, struct wbd_config *cfg)
{
	unsigned n = ld->lc.num_filenames;

	if (n == 0)
		return 0;
	if ((cfg->files = calloc(n, sizeof *cfg->files)) == NULL) {
		cfg_nomem(ld);
		return -1;
	}
	for (unsigned i = 0; i < n; i++) {
		if (cfg_strdup(ld, ld->lc.filenames[i], &cfg->files[i]) == -1)
			return -1;
		cfg->n_files++;
	}
	return 0;
}

static int
cfg_read(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg)
{
	static const char *const keys[] = { "listen", "io_threads",
		"io_threads_batch", "cache", "writeback", "control", "remote",
		"limits", "memory", "tls", "metrics", "user", "group",
		"journal", "exports", "default_export", NULL };

	if (cfg_files(ld, cfg) == -1 || cfg_check_keys(ld, root, keys) == -1 ||
	    cfg_listen(ld, root, cfg) == -1 ||
	    cfg_uint(ld, root, "io_threads",
		(unsigned)cfg_row_of("", "io_threads")->min,
		CFG_MAX("", "io_threads"), &cfg->io_threads) == -1 ||
	    cfg_bool(ld, root, "io_threads_batch", &cfg->io_threads_batch) ==
		-1 ||
	    cfg_cache(ld, root, cfg) == -1 ||
	    cfg_writeback(ld, root, cfg) == -1 ||
	    cfg_control(ld, root, cfg) == -1 ||
	    cfg_rows(ld, root, "remote", cfg) == -1 ||
	    cfg_limits(ld, root, cfg) == -1 || cfg_tls(ld, root, cfg) == -1 ||
	    cfg_run_as(ld, root, &cfg->run_as) == -1 ||
	    cfg_rows(ld, root, "memory", cfg) == -1 ||
	    cfg_rows(ld, root, "metrics", cfg) == -1 ||
	    cfg_journal(ld, root, cfg) == -1 ||
	    cfg_exports(ld, root, cfg) == -1 ||
	    cfg_default_export(ld, root, cfg) == -1)
		return -1;
	for (size_t i = 0; i < cfg->n_exports; i++) {
		if (!cfg->exports[i].tls_require || cfg->tls.mode != TLS_OFF)
			continue;
		const config_setting_t *e =
		    config_setting_get_elem(config_setting_get_member(root,
						"exports"),
			(unsigned)i);
		cfg_error(ld, config_setting_get_member(e, "tls"),
		    "expected tls.mode \"on\" or \"require\" for a TLS-only "
		    "export: TLS is off");
		return -1;
	}
	return 0;
}

int
config_load(const char *path, struct wbd_config *cfg, char *err, size_t errlen)
{
	struct cfg_load ld;
	config_setting_t *root;
	int rc = -1, saved;

	cfg_begin(&ld, path, err, errlen);
	config_defaults(cfg);
	if (cfg->n_listen_tcp == 0 || (cfg->path = strdup(path)) == NULL)
		cfg_nomem(&ld);
	else if ((root = cfg_read_file(&ld)) != NULL)
		rc = cfg_read(&ld, root, cfg);
	cfg->warnings = ld.warnings;
	ld.warnings = NULL;
	cfg_end(&ld);
	if (rc == -1) {
		saved = errno;
		config_free(cfg);
		errno = saved;
	}
	return rc;
}

/*
 * Every row's default (settings_defaults), then the listener.  Those need
 * memory: if it cannot be had, cfg has no listener, which config_load()
 * reports as out of memory.
 */
void
config_defaults(struct wbd_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	if (settings_defaults(cfg) == -1)
		return;
	if ((cfg->listen_tcp = calloc(1, sizeof *cfg->listen_tcp)) != NULL) {
		if ((cfg->listen_tcp[0] = strdup(WBD_DEFAULT_TCP)) != NULL) {
			cfg->n_listen_tcp = 1;
		} else {
			free(cfg->listen_tcp);
			cfg->listen_tcp = NULL;
		}
	}
	cfg->unix_mode = 0660;
	cfg->io_threads = 0;
}

void
config_free(struct wbd_config *cfg)
{
	size_t i;

	if (cfg == NULL)
		return;
	free(cfg->path);
	cfg_free_strings(&cfg->files, &cfg->n_files);
	cfg_free_listeners(&cfg->listen_tcp, &cfg->listen_tcp_at,
	    &cfg->listen_tcp_idle_s, &cfg->n_listen_tcp);
	cfg_free_listeners(&cfg->listen_unix, &cfg->listen_unix_at,
	    &cfg->listen_unix_idle_s, &cfg->n_listen_unix);
	for (i = 0; i < cfg->n_exports; i++) {
		free(cfg->exports[i].name);
		free(cfg->exports[i].description);
		free(cfg->exports[i].backing);
		free(cfg->exports[i].journal.path);
		free(cfg->exports[i].journal.dir);
		free(cfg->exports[i].journal.state_dir);
		access_list_unref(cfg->exports[i].allow);
	}
	free(cfg->exports);
	free(cfg->default_export);
	free(cfg->journal.dir);
	free(cfg->journal.state_dir);
	free(cfg->control.socket);
	free(cfg->control.group);
	free(cfg->control.admin_group);
	free(cfg->unix_group);
	free(cfg->run_as.user);
	free(cfg->run_as.group);
	free(cfg->tls.certificates);
	free(cfg->tls.psk_file);
	free(cfg->tls.priority);
	free(cfg->warnings);
	free(cfg->metrics.listen);
	for (i = 0; i < cfg->writeback.n_devices; i++)
		free(cfg->writeback.devices[i].device);
	free(cfg->writeback.devices);
	memset(cfg, 0, sizeof *cfg);
}

const char *
config_where_str(const struct wbd_config *cfg, const struct config_where *at,
    char *buf, size_t len)
{
	if (at != NULL && at->line > 0 && at->file < cfg->n_files)
		snprintf(buf, len, "%s:%u", cfg->files[at->file], at->line);
	else
		snprintf(buf, len, "%s", cfg->path);
	return buf;
}

void
config_log_warnings(const struct wbd_config *cfg, const char *prefix)
{
	const char *p = cfg->warnings;

	while (p && *p) {
		size_t len = strcspn(p, "\n");
		log_warnx("%s%.*s", prefix, (int)len, p);
		p += len + (p[len] == '\n');
	}
}

bool
config_export_open_to_all(const struct export_conf *ec)
{
	return ec->allow == NULL;
}

/* Does the TCP listener SPEC bind loopback addresses only? */
static bool
config_listen_loopback(const char *spec)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM },
			*res, *ai;
	char *host, *port;
	bool loopback = true;

	if (config_parse_hostport(spec, &host, &port) == -1)
		return true; /* not a listener: nothing is bound */
	if (strcmp(host, "localhost") == 0 || !*host) {
		loopback = *host != '\0';
	} else if (getaddrinfo(host, port, &hints, &res) == 0) {
		for (ai = res; ai; ai = ai->ai_next) {
			const struct sockaddr_in6 *s6 = (void *)ai->ai_addr;
			const struct sockaddr_in *s4 = (void *)ai->ai_addr;
			if (ai->ai_family == AF_INET6)
				loopback &=
				    IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr);
			else
				loopback &= (ntohl(s4->sin_addr.s_addr) >>
						24) == IN_LOOPBACKNET;
		}
		freeaddrinfo(res);
	}
	free(host);
	free(port);
	return loopback;
}

size_t
config_exposed_listeners(const struct wbd_config *cfg, bool tls_on,
    const char **out, size_t max)
{
	bool open_export = false;
	size_t n = 0;

	for (size_t i = 0; i < cfg->n_exports; i++)
		open_export |= config_export_open_to_all(&cfg->exports[i]);
	if (tls_on || !open_export)
		return 0;
	for (size_t i = 0; i < cfg->n_listen_tcp; i++) {
		if (config_listen_loopback(cfg->listen_tcp[i]))
			continue;
		if (n < max)
			out[n] = cfg->listen_tcp[i];
		n++;
	}
	return n;
}

static const struct {
	enum cache_mode mode;
	const char *name;
} cache_modes[] = {
	{ CACHE_WRITEBACK, "writeback" },
	{ CACHE_WRITETHROUGH, "writethrough" },
	{ CACHE_WRITETHROUGH_UNTIL_FLUSH, "writethrough-until-flush" },
};

const char *
cache_mode_name(enum cache_mode m)
{
	size_t i;

	for (i = 0; i < sizeof cache_modes / sizeof cache_modes[0]; i++)
		if (cache_modes[i].mode == m)
			return cache_modes[i].name;
	return "unknown";
}

int
cache_mode_parse(const char *s, enum cache_mode *out)
{
	size_t i;

	for (i = 0; i < sizeof cache_modes / sizeof cache_modes[0]; i++) {
		if (strcmp(cache_modes[i].name, s) == 0) {
			*out = cache_modes[i].mode;
			return 0;
		}
	}
	errno = EINVAL;
	return -1;
}
