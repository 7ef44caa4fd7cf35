/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * config.c - wbd.conf: filling a struct wbd_config from it.
 *
 * The reading itself (errors with file and line, unknown keys, typed
 * getters) is cfgread.c's.  The keys of the groups cache, writeback,
 * control, remote, limits, tls, memory and metrics, with their defaults
 * and limits, are rows of the settings table (base/settings-table.c): a
 * group is read by one walk over its rows (cfg_walk), a key checked
 * against this machine by a hook (cfg_hooks).  The listeners, the user,
 * the exports and the top level are read here by hand.  It runs on the
 * main thread at start-up, or on the thread that reloads, and keeps no
 * state between calls: everything lives in a struct cfg_load on the
 * stack of config_load().
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <libconfig.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "access.h"
#include "backend.h"
#include "budget.h"
#include "cfgread.h"
#include "config-load.h"
#include "log.h"
#include "settings.h"
#include "size.h"
#include "tls.h"
#include "utf8.h"

#define NAME_MAX_BYTES 4096 /* NBD's limit on names, descriptions */
#define IO_THREADS_MAX          1024u
#define UNIX_PATH_BYTES         sizeof(((struct sockaddr_un *)0)->sun_path)

/* A cache above this share of RAM is accepted with a warning. */
#define CACHE_WARN_PCT 75u
/* The largest file offset (off_t): no export can be larger. */
#define EXPORT_MAX_BYTES ((uint64_t)INT64_MAX)

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
static struct config_where
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

/* "host:port" or "[v6addr]:port"; a v6 address may carry a "%scope". */
int
config_parse_hostport(const char *s, char **hostp, char **portp)
{
	const char *host, *hend, *port, *p;
	char addr[INET6_ADDRSTRLEN + 1];
	struct in6_addr in6;
	unsigned long v;
	size_t n;

	*hostp = *portp = NULL;
	if (s[0] == '[') {
		host = s + 1;
		if ((hend = strchr(host, ']')) == NULL || hend[1] != ':')
			goto invalid;
		port = hend + 2;
		n = strcspn(host, "%]");
		if (n == 0 || n >= sizeof addr)
			goto invalid;
		memcpy(addr, host, n);
		addr[n] = '\0';
		if (inet_pton(AF_INET6, addr, &in6) != 1)
			goto invalid;
		if (host[n] == '%') {
			if (host + n + 1 == hend)
				goto invalid;
			for (p = host + n + 1; p < hend; p++)
				if (!isalnum((unsigned char)*p) && *p != '.' &&
				    *p != '-' && *p != '_')
					goto invalid;
		}
	} else {
		if ((hend = strrchr(s, ':')) == NULL)
			goto invalid;
		host = s;
		port = hend + 1;
		/* An IPv6 address needs brackets; so does nothing else. */
		if (hend == host)
			goto invalid;
		for (p = host; p < hend; p++)
			if (!isalnum((unsigned char)*p) && *p != '.' &&
			    *p != '-' && *p != '_')
				goto invalid;
	}
	if (strlen(port) < 1 || strlen(port) > 5 ||
	    strspn(port, "0123456789") != strlen(port))
		goto invalid;
	v = strtoul(port, NULL, 10);
	if (v < 1 || v > 65535)
		goto invalid;
	if ((*hostp = strndup(host, (size_t)(hend - host))) == NULL ||
	    (*portp = strdup(port)) == NULL) {
		free(*hostp);
		*hostp = NULL;
		errno = ENOMEM;
		return -1;
	}
	return 0;

invalid:
	errno = EINVAL;
	return -1;
}

static int
cfg_check_tcp(struct cfg_load *ld, const config_setting_t *s)
{
	char *host, *port, got[96];

	if (config_parse_hostport(config_setting_get_string(s), &host,
	    &port) == -1) {
		if (errno == ENOMEM) {
			cfg_nomem(ld);
			return -1;
		}
		cfg_error(ld, s, "expected \"host:port\" or \"[v6addr]:port\" "
		    "with a port from 1 to 65535, got %s",
		    cfg_repr(s, got, sizeof got));
		return -1;
	}
	free(host);
	free(port);
	return 0;
}

static int
cfg_check_unix(struct cfg_load *ld, const config_setting_t *s)
{
	size_t len = strlen(config_setting_get_string(s));

	if (len == 0 || len >= UNIX_PATH_BYTES) {
		cfg_error(ld, s, "expected a socket path of 1 to %zu bytes, got "
		    "%zu bytes", UNIX_PATH_BYTES - 1, len);
		return -1;
	}
	return 0;
}

/* listen.tcp or listen.unix: a list of distinct strings, into *OUT, and
 * where each is written, into *AT. */
static int
cfg_listen_list(struct cfg_load *ld, const config_setting_t *listen,
    const char *key, const char *example,
    int (*check)(struct cfg_load *, const config_setting_t *), char ***out,
    struct config_where **at, size_t *n_out)
{
	config_setting_t *s, *e;
	const char *str;
	char got[96], where[256];
	int i, j, n;

	if ((s = config_setting_get_member(listen, key)) == NULL)
		return 0;
	if (!config_setting_is_array(s) && !config_setting_is_list(s)) {
		cfg_error(ld, s, "expected a list of strings such as [ \"%s\" ], "
		    "got %s", example, cfg_repr(s, got, sizeof got));
		return -1;
	}
	n = config_setting_length(s);
	if (n == 0)
		return 0;
	if ((*out = calloc((size_t)n, sizeof **out)) == NULL ||
	    (*at = calloc((size_t)n, sizeof **at)) == NULL) {
		cfg_nomem(ld);
		return -1;
	}
	for (i = 0; i < n; i++) {
		e = config_setting_get_elem(s, i);
		if (config_setting_type(e) != CONFIG_TYPE_STRING) {
			cfg_error(ld, e, "expected a string such as \"%s\", "
			    "got %s", example, cfg_repr(e, got, sizeof got));
			return -1;
		}
		str = config_setting_get_string(e);
		if (check(ld, e) == -1)
			return -1;
		for (j = 0; j < i; j++) {
			if (strcmp((*out)[j], str) == 0) {
				cfg_key_path(config_setting_get_elem(s, j),
				    where, sizeof where);
				cfg_error(ld, e, "expected each listener once, "
				    "got %s again (first at %s)",
				    cfg_repr(e, got, sizeof got), where);
				return -1;
			}
		}
		if (cfg_strdup(ld, str, &(*out)[i]) == -1)
			return -1;
		(*at)[i] = cfg_at(ld, e);
		(*n_out)++;
	}
	return 0;
}

static void
cfg_free_strings(char ***v, size_t *n)
{
	size_t i;

	for (i = 0; i < *n; i++)
		free((*v)[i]);
	free(*v);
	*v = NULL;
	*n = 0;
}

/* A list of listeners and where each is written. */
static void
cfg_free_listeners(char ***v, struct config_where **at, size_t *n)
{
	cfg_free_strings(v, n);
	free(*at);
	*at = NULL;
}

/* KEY of GROUP: an octal file mode such as "0660": 1 and *OUT, 0 if
 * absent, -1. */
static int
cfg_mode(struct cfg_load *ld, const config_setting_t *g, const char *key,
    unsigned *out)
{
	const char *str;
	char got[96], *end;
	int r;

	if ((r = cfg_string(ld, g, key, 8, &str)) != 1)
		return r;
	unsigned long m = strtoul(str, &end, 8);
	if (*end || m > 0777 || str[0] != '0') {
		config_setting_t *s = config_setting_get_member(g, key);
		cfg_error(ld, s,
		    "expected an octal mode such as \"0660\", got %s",
		    cfg_repr(s, got, sizeof got));
		return -1;
	}
	*out = (unsigned)m;
	return 1;
}

/* KEY of G names a group: its name in *NAME and its gid in *GID.  1, 0 if
 * absent, -1 (an unknown group too). */
static int
cfg_group_name(struct cfg_load *ld, const config_setting_t *g, const char *key,
    char **name, uint32_t *gid)
{
	const char *str;
	int r;

	if ((r = cfg_string(ld, g, key, 255, &str)) != 1)
		return r;
	if ((r = access_group_id(str, gid)) != 0) {
		cfg_error(ld, config_setting_get_member(g, key),
		    r == ENOENT ? "expected a known group, got \"%s\": no such "
				  "group" :
				  "cannot look up group \"%s\": %s",
		    str, strerror(r));
		return -1;
	}
	free(*name);
	*name = NULL;
	return cfg_strdup(ld, str, name) == -1 ? -1 : 1;
}

static int
cfg_listen(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg)
{
	static const char *const keys[] = { "tcp", "unix", "unix_mode",
		"unix_group", NULL };
	config_setting_t *listen;
	int r;

	/* Absent: the default, 127.0.0.1:10809, from config_defaults(). */
	if ((r = cfg_group(ld, root, "listen", &listen)) <= 0)
		return r;
	cfg_free_listeners(&cfg->listen_tcp, &cfg->listen_tcp_at,
	    &cfg->n_listen_tcp);
	if (cfg_check_keys(ld, listen, keys) == -1 ||
	    cfg_listen_list(ld, listen, "tcp", WBD_DEFAULT_TCP, cfg_check_tcp,
		&cfg->listen_tcp, &cfg->listen_tcp_at,
		&cfg->n_listen_tcp) == -1 ||
	    cfg_listen_list(ld, listen, "unix", "/run/wbd/nbd.sock",
		cfg_check_unix, &cfg->listen_unix, &cfg->listen_unix_at,
		&cfg->n_listen_unix) == -1 ||
	    cfg_mode(ld, listen, "unix_mode", &cfg->unix_mode) == -1 ||
	    cfg_group_name(ld, listen, "unix_group", &cfg->unix_group,
		&cfg->unix_gid) == -1)
		return -1;
	if (cfg->n_listen_tcp + cfg->n_listen_unix == 0) {
		cfg_error(ld, listen, "at least one listener expected, such as "
		    "tcp = [ \"%s\" ]; or unix = [ \"/run/wbd/nbd.sock\" ];",
		    WBD_DEFAULT_TCP);
		return -1;
	}
	return 0;
}

/* cache.size: a size, or "N%" of RAM resolved to whole pages; at most the
 * RAM and at least one page.  Read after page_size, and checked when it
 * is absent too (the default against this machine). */
static int
cfg_cache_size(struct cfg_load *ld, const config_setting_t *cache,
    const struct setting *row, void *conf)
{
	struct cache_conf *cc = conf;
	config_setting_t *s;
	uint64_t v, ram;
	long pages, pagesz;
	char got[96], buf[32], have[32];
	int r;

	if ((r = cfg_size(ld, cache, row->name, &v, &cc->size_pct)) == -1)
		return -1;
	s = config_setting_get_member(cache, row->name);
	if (r == 1 && cc->size_pct != 0) {
		pages = sysconf(_SC_PHYS_PAGES);
		pagesz = sysconf(_SC_PAGESIZE);
		if (pages <= 0 || pagesz <= 0) {
			cfg_error(ld, s, "expected a size in bytes: the amount "
			    "of RAM is unknown");
			return -1;
		}
		ram = (uint64_t)pages * (uint64_t)pagesz;
		v = ram / 100 * cc->size_pct + ram % 100 * cc->size_pct / 100;
		v -= v % cc->page_size;
	}
	if (r == 1)
		cc->size_bytes = v;
	pages = sysconf(_SC_PHYS_PAGES);
	pagesz = sysconf(_SC_PAGESIZE);
	ram = pages > 0 && pagesz > 0 ? (uint64_t)pages * (uint64_t)pagesz : 0;
	if (ram && cc->size_bytes > ram) {
		cfg_error(ld, s,
		    "expected cache.size at most this machine's "
		    "memory (%s), got %s",
		    size_human(ram, have, sizeof have),
		    cfg_repr(s, got, sizeof got));
		return -1;
	}
	if (ram && cc->size_bytes / CACHE_WARN_PCT > ram / 100)
		cfg_warn(ld, s ? s : cache,
		    "%s is more than %u%% of this machine's memory (%s): "
		    "little is left for wbd's connections and the rest of "
		    "the system, and a process out of memory may be killed "
		    "with acknowledged data still in its cache",
		    size_human(cc->size_bytes, buf, sizeof buf), CACHE_WARN_PCT,
		    size_human(ram, have, sizeof have));
	if (cc->size_bytes < cc->page_size) {
		if (s == NULL)
			s = config_setting_get_member(cache, "page_size");
		cfg_error(ld, s, "expected cache.size to hold at least one page "
		    "of cache.page_size (%s), got %s",
		    size_format(cc->page_size, buf, sizeof buf),
		    cfg_repr(s, got, sizeof got));
		return -1;
	}
	return r;
}

/* control.socket: a path, or "none" for no control socket. */
static int
cfg_control_socket(struct cfg_load *ld, const config_setting_t *g,
    const struct setting *row, void *conf)
{
	struct control_conf *cc = conf;
	const char *str;
	int r;

	if ((r = cfg_string(ld, g, row->name, row->max, &str)) != 1)
		return r;
	free(cc->socket);
	cc->socket = NULL;
	if (strcmp(str, "none") != 0 && cfg_strdup(ld, str, &cc->socket) == -1)
		return -1;
	cc->socket_at = cfg_at(ld, config_setting_get_member(g, row->name));
	return 1;
}

/* Does group NAME exist (thread-safe: a reload may run on the control
 * thread)?  A lookup that fails for another reason says yes: start-up
 * will tell. */
static bool
cfg_group_exists(const char *name)
{
	struct group gr, *found = NULL;
	char buf[16384];
	int r = getgrnam_r(name, &gr, buf, sizeof buf, &found);

	return r != 0 || found != NULL;
}

/* control.group: a group of this machine, or wbd could not give the socket
 * to it and would not start. */
static int
cfg_control_group(struct cfg_load *ld, const config_setting_t *g,
    const struct setting *row, void *conf)
{
	struct control_conf *cc = conf;
	const char *str;
	int r;

	if ((r = cfg_string(ld, g, row->name, row->max, &str)) != 1)
		return r;
	if (!cfg_group_exists(str)) {
		cfg_error(ld, config_setting_get_member(g, row->name),
		    "expected a group of this machine, got \"%s\"", str);
		return -1;
	}
	if (cfg_strdup(ld, str, &cc->group) == -1)
		return -1;
	cc->group_at = cfg_at(ld, config_setting_get_member(g, row->name));
	return 1;
}

/* control.admin_group: a group unknown here is only worth a warning. */
static int
cfg_control_admin_group(struct cfg_load *ld, const config_setting_t *g,
    const struct setting *row, void *conf)
{
	struct control_conf *cc = conf;
	const char *str;
	int r;

	if ((r = cfg_string(ld, g, row->name, row->max, &str)) != 1)
		return r;
	if (!cfg_group_exists(str))
		cfg_warn(ld, config_setting_get_member(g, row->name),
		    "no group \"%s\" on this machine: only root may change "
		    "settings",
		    str);
	return cfg_strdup(ld, str, &cc->admin_group) == -1 ? -1 : 1;
}

/* metrics.listen: one TCP listener, "host:port". */
static int
cfg_metrics_listen(struct cfg_load *ld, const config_setting_t *g,
    const struct setting *row, void *conf)
{
	struct metrics_conf *mc = conf;
	const char *str;
	int r;

	if ((r = cfg_string(ld, g, row->name, row->max, &str)) != 1)
		return r;
	if (cfg_check_tcp(ld, config_setting_get_member(g, row->name)) == -1 ||
	    cfg_strdup(ld, str, &mc->listen) == -1)
		return -1;
	return 1;
}

/* The rows read their own way, as they check more than their type (this
 * machine, another row); each runs whether its key is given or not.
 * Returns 1, 0 if the key is absent, -1. */
static const struct {
	const char *group, *name;
	int (*read)(struct cfg_load *ld, const config_setting_t *g,
	    const struct setting *row, void *conf);
} cfg_hooks[] = {
	{ "cache", "size", cfg_cache_size },
	{ "control", "socket", cfg_control_socket },
	{ "control", "group", cfg_control_group },
	{ "control", "admin_group", cfg_control_admin_group },
	{ "metrics", "listen", cfg_metrics_listen },
};

/* An enum row from GROUP, a string of row->max bytes at most: 1 and *OUT
 * (the index of its name), 0 if absent, -1. */
static int
cfg_enum(struct cfg_load *ld, const config_setting_t *group,
    const struct setting *row, uint64_t *out)
{
	config_setting_t *s;
	char got[96], list[256];
	const char *str;
	size_t n = 0, len = 0;
	int r;

	if ((r = cfg_string(ld, group, row->name, row->max, &str)) != 1)
		return r;
	for (n = 0; row->names[n] != NULL; n++)
		if (strcmp(row->names[n], str) == 0) {
			*out = n;
			return 1;
		}
	/* "\"off\", \"on\" or \"require\"" */
	for (size_t i = 0; i < n && len < sizeof list; i++)
		len +=
		    (size_t)snprintf(list + len, sizeof list - len, "%s\"%s\"",
			i == 0         ? "" :
			    i + 1 == n ? " or " :
					 ", ",
			row->names[i]);
	s = config_setting_get_member(group, row->name);
	cfg_error(ld, s, "expected %s, got %s", list,
	    cfg_repr(s, got, sizeof got));
	return -1;
}

/* A number, bool, mode or enum row from GROUP: 1 and *OUT, 0 if absent,
 * -1. */
static int
cfg_setting(struct cfg_load *ld, const config_setting_t *group,
    const struct setting *row, uint32_t page_size, uint64_t *out)
{
	config_setting_t *s;
	char got[96], a[32], b[32];
	unsigned u;
	uint64_t v;
	bool on;
	int r;

	switch (row->type) {
	case SETTING_UINT:
	case SETTING_RATIO:
		r = cfg_uint(ld, group, row->name, (unsigned)row->min,
		    (unsigned)row->max, &u);
		break;
	case SETTING_MODE:
		r = cfg_mode(ld, group, row->name, &u);
		break;
	case SETTING_BOOL:
		if ((r = cfg_bool(ld, group, row->name, &on)) == 1)
			u = on;
		break;
	case SETTING_ENUM:
		return cfg_enum(ld, group, row, out);
	default:
		if ((r = cfg_size(ld, group, row->name, &v, NULL)) != 1)
			return r;
		if (settings_valid(row, v, page_size)) {
			*out = v;
			return 1;
		}
		s = config_setting_get_member(group, row->name);
		if (row->type == SETTING_IO_BYTES)
			cfg_error(ld, s,
			    "expected a power of two from "
			    "cache.page_size (%s) to %s, got %s",
			    size_format(page_size, a, sizeof a),
			    size_format(row->max, b, sizeof b),
			    cfg_repr(s, got, sizeof got));
		else if (row->type == SETTING_POW2)
			cfg_error(ld, s,
			    "expected a power of two from %s to %s, "
			    "got %s",
			    size_format(row->min, a, sizeof a),
			    size_format(row->max, b, sizeof b),
			    cfg_repr(s, got, sizeof got));
		else if (row->pair != NULL)
			cfg_error(ld, s,
			    "expected a size above 0 (to give a "
			    "ratio, set %s instead)",
			    row->pair);
		else
			cfg_error(ld, s,
			    "expected a size from %s%s to %s, got %s",
			    size_format(row->min, a, sizeof a),
			    row->min == 0 ? " (off)" : "",
			    size_format(row->max, b, sizeof b),
			    cfg_repr(s, got, sizeof got));
		return -1;
	}
	if (r == 1)
		*out = u;
	return r;
}

/* One row from GROUP into CONF, its group's struct: 1, 0 if absent, -1. */
static int
cfg_row(struct cfg_load *ld, const config_setting_t *group,
    const struct setting *row, void *conf, uint32_t page_size)
{
	const char *str;
	uint64_t v;
	char **p;
	int r;

	for (size_t i = 0; i < sizeof cfg_hooks / sizeof cfg_hooks[0]; i++)
		if (strcmp(cfg_hooks[i].group, row->group) == 0 &&
		    strcmp(cfg_hooks[i].name, row->name) == 0)
			return cfg_hooks[i].read(ld, group, row, conf);
	if (row->type == SETTING_STRING) {
		if ((r = cfg_string(ld, group, row->name, row->max, &str)) != 1)
			return r;
		p = (char **)((char *)conf + row->offset);
		free(*p);
		*p = NULL;
		return cfg_strdup(ld, str, p) == -1 ? -1 : 1;
	}
	if ((r = cfg_setting(ld, group, row, page_size, &v)) == 1)
		settings_store(row, conf, v);
	return r;
}

/*
 * Group NAME of the file, at G (NULL: absent, nothing to read), into CONF,
 * its struct: a key must be one of its rows or of EXTRA (NULL-terminated,
 * may be NULL); then each row is read in the table's order, a late row
 * after the others.  The bit of each row given is set in *GIVEN (may be
 * NULL).  PAGE_SIZE is the cache's, for a row bounded by it.
 */
static int
cfg_walk(struct cfg_load *ld, const config_setting_t *g, const char *name,
    const char *const *extra, void *conf, uint32_t page_size, uint64_t *given)
{
	const char *keys[SETTINGS_MAX + 8];
	const struct setting *first, *row;
	size_t n, n_keys = 0;
	int r;

	if (g == NULL)
		return 0;
	first = settings_group(name, &n);
	for (row = first; row != NULL && row < first + n; row++)
		keys[n_keys++] = row->name;
	for (; extra != NULL && *extra != NULL; extra++)
		keys[n_keys++] = *extra;
	keys[n_keys] = NULL;
	if (cfg_check_keys(ld, g, keys) == -1)
		return -1;
	for (int late = 0; late <= 1; late++) {
		for (row = first; row != NULL && row < first + n; row++) {
			if (row->late != late)
				continue;
			if ((r = cfg_row(ld, g, row, conf, page_size)) == -1)
				return -1;
			if (r == 1 && given != NULL)
				*given |= settings_bit(row);
		}
	}
	return 0;
}

/* A group of the table, its rows read (and its checks between keys left
 * to the caller): the whole of remote, limits, memory and metrics. */
static int
cfg_rows(struct cfg_load *ld, const config_setting_t *root, const char *name,
    struct wbd_config *cfg)
{
	config_setting_t *g;

	if (cfg_group(ld, root, name, &g) == -1)
		return -1;
	return cfg_walk(ld, g, name, NULL, settings_conf(name, cfg),
	    cfg->cache.page_size, NULL);
}

/* cache = { size; page_size; readahead_bytes; } */
static int
cfg_cache(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg)
{
	return cfg_rows(ld, root, "cache", cfg);
}

/* control = { socket; mode; group; admin_group; max_clients; ... }: the
 * last slots kept for the admins leave one for anyone. */
static int
cfg_control(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg)
{
	struct control_conf *cc = &cfg->control;
	config_setting_t *g, *s;

	if (cfg_rows(ld, root, "control", cfg) == -1)
		return -1;
	g = config_setting_get_member(root, "control");
	if (g == NULL || cc->admin_reserved < cc->max_clients)
		return 0;
	s = config_setting_get_member(g, "admin_reserved");
	cfg_error(ld, s ? s : config_setting_get_member(g, "max_clients"),
	    "admin_reserved (%u) must be less than max_clients (%u)",
	    cc->admin_reserved, cc->max_clients);
	return -1;
}

/* limits = { max_connections; reserved_connections; ... }: the reserve
 * for new clients leaves room for the others.  Not given, it is at most
 * max_connections / 16 (64 of the default 1024). */
static int
cfg_limits(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg)
{
	struct limits_conf *lc = &cfg->limits;
	config_setting_t *g, *s;

	if (cfg_rows(ld, root, "limits", cfg) == -1)
		return -1;
	g = config_setting_get_member(root, "limits");
	s = g ? config_setting_get_member(g, "reserved_connections") : NULL;
	if (s == NULL) {
		if (lc->reserved_connections > lc->max_connections / 16)
			lc->reserved_connections = lc->max_connections / 16;
		return 0;
	}
	if (lc->reserved_connections < lc->max_connections)
		return 0;
	cfg_error(ld, s,
	    "reserved_connections (%u) must be less than max_connections (%u)",
	    lc->reserved_connections, lc->max_connections);
	return -1;
}

/*
 * writeback.devices = ( { device = "MAJ:MIN"; min_ratio; max_ratio; } ):
 * the per-device rows of the settings table, each defaulting to the
 * writeback group's.  The rules between them are settings_check's.
 */
static int
cfg_devices(struct cfg_load *ld, const config_setting_t *wb,
    struct writeback_conf *wc, uint32_t page_size)
{
	const char *keys[SETTINGS_MAX + 3];
	const struct setting *row;
	config_setting_t *list;
	size_t n_keys = 0;
	char got[96];
	uint64_t v;

	if (wb == NULL || (list = config_setting_get_member(wb, "devices")) == NULL)
		return 0;
	if (!config_setting_is_list(list) && !config_setting_is_array(list)) {
		cfg_error(ld, list, "expected a list of groups such as "
		    "( { device = \"8:0\"; max_ratio = 50; } ), got %s",
		    cfg_repr(list, got, sizeof got));
		return -1;
	}
	keys[n_keys++] = "device";
	for (row = settings_table; row < settings_table + settings_n; row++)
		if (row->scope == SETTING_DEVICE)
			keys[n_keys++] = row->name;
	keys[n_keys] = NULL;
	int n = config_setting_length(list);
	if (n == 0)
		return 0;
	wc->devices = calloc((size_t)n, sizeof *wc->devices);
	if (wc->devices == NULL) {
		cfg_nomem(ld);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		config_setting_t *g = config_setting_get_elem(list, (unsigned)i);
		struct device_conf *dc = &wc->devices[wc->n_devices];
		const char *name;
		unsigned maj, min;
		char extra;

		if (!config_setting_is_group(g)) {
			cfg_error(ld, g, "expected a group such as "
			    "{ device = \"8:0\"; max_ratio = 50; }, got %s",
			    cfg_repr(g, got, sizeof got));
			return -1;
		}
		if (cfg_check_keys(ld, g, keys) == -1)
			return -1;
		dc->line = (int)config_setting_source_line(g);
		if (!config_setting_lookup_string(g, "device", &name) ||
		    sscanf(name, "%u:%u%c", &maj, &min, &extra) != 2) {
			config_setting_t *s = config_setting_get_member(g, "device");
			cfg_error(ld, s ? s : g, "expected device = \"MAJ:MIN\" "
			    "(as in /proc/PID/task/*/comm flush-MAJ:MIN)%s%s",
			    s ? ", got " : "", s ? cfg_repr(s, got, sizeof got) : "");
			return -1;
		}
		if (cfg_strdup(ld, name, &dc->device) == -1)
			return -1;
		wc->n_devices++;
		for (row = settings_table; row < settings_table + settings_n;
		    row++) {
			if (row->scope != SETTING_DEVICE)
				continue;
			settings_set_dev(row, dc, settings_get(row, wc));
			switch (cfg_setting(ld, g, row, page_size, &v)) {
			case -1:
				return -1;
			case 1:
				settings_set_dev(row, dc, v);
				break;
			}
		}
		for (size_t j = 0; j + 1 < wc->n_devices; j++)
			if (strcmp(wc->devices[j].device, dc->device) == 0) {
				cfg_error(ld,
				    config_setting_get_member(g, "device"),
				    "device %s already configured at line %d",
				    dc->device, wc->devices[j].line);
				return -1;
			}
	}
	return 0;
}

void
config_device_ratios(const struct wbd_config *cfg, const char *name,
    unsigned *min_ratio, unsigned *max_ratio)
{
	*min_ratio = cfg->writeback.min_ratio;
	*max_ratio = cfg->writeback.max_ratio;
	for (size_t i = 0; i < cfg->writeback.n_devices; i++)
		if (strcmp(cfg->writeback.devices[i].device, name) == 0) {
			*min_ratio = cfg->writeback.devices[i].min_ratio;
			*max_ratio = cfg->writeback.devices[i].max_ratio;
		}
}

/* writeback.io_engine = "auto" | "pwritev" | "pwrite" | "io_uring". */
static int
cfg_io_engine(struct cfg_load *ld, const config_setting_t *wb,
    struct writeback_conf *wc)
{
	const config_setting_t *s;
	char got[64];
	int e;

	wc->io_engine = BACKEND_IO_AUTO;
	if (wb == NULL ||
	    (s = config_setting_get_member(wb, "io_engine")) == NULL)
		return 0;
	if (config_setting_type(s) != CONFIG_TYPE_STRING ||
	    (e = backend_io_engine_parse(config_setting_get_string(s))) < 0) {
		cfg_error(ld, s,
		    "expected \"auto\", \"pwritev\", \"pwrite\" "
		    "or \"io_uring\", got %s",
		    cfg_repr(s, got, sizeof got));
		return -1;
	}
	wc->io_engine = e;
	return 0;
}

/* The writeback group: the rows of the settings table, devices and the
 * I/O engine. */
static int
cfg_writeback(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg)
{
	struct writeback_conf *wc = &cfg->writeback;
	struct settings_env env = {
		.total_pages = cfg->cache.size_bytes / cfg->cache.page_size,
		.page_size = cfg->cache.page_size,
		.prefix = "writeback.",
		.kept = "the default",
	};
	static const char *const extra[] = { "devices", "io_engine", NULL };
	struct settings_err e;
	config_setting_t *wb, *list, *dev, *s;
	uint64_t given = 0;

	if (cfg_group(ld, root, "writeback", &wb) == -1 ||
	    cfg_walk(ld, wb, "writeback", extra, wc, cfg->cache.page_size,
		&given) == -1)
		return -1;
	if (cfg_devices(ld, wb, wc, cfg->cache.page_size) == -1 ||
	    cfg_io_engine(ld, wb, wc) == -1)
		return -1;
	if (settings_check(wc, wc->devices, wc->n_devices, &env, given,
	    &e) == 0)
		return 0;
	if (e.dev >= 0) {
		/* A device's min_ratio is the one at fault, if it gave one. */
		list = config_setting_get_member(wb, "devices");
		dev = config_setting_get_elem(list, (unsigned)e.dev);
		if ((s = config_setting_get_member(dev, "min_ratio")) == NULL)
			s = config_setting_get_member(dev, "max_ratio");
		cfg_error(ld, s ? s : dev, "%s", e.msg);
	} else {
		cfg_error(ld, wb ? config_setting_get_member(wb,
		    e.row->name) : NULL, "%s", e.msg);
	}
	return -1;
}

/* An export's allow = [ "127.0.0.0/8", "uid:1000", ... ] (access.h). */
static int
cfg_allow(struct cfg_load *ld, const config_setting_t *e,
    struct export_conf *ex)
{
	config_setting_t *s = config_setting_get_member(e, "allow");
	char got[96], err[384];

	if (s == NULL)
		return 0;
	if (!config_setting_is_array(s) && !config_setting_is_list(s)) {
		cfg_error(ld, s,
		    "expected a list of strings such as "
		    "[ \"127.0.0.1\", \"uid:1000\" ], got %s",
		    cfg_repr(s, got, sizeof got));
		return -1;
	}
	int n = config_setting_length(s);
	if ((ex->allow = access_list_new((size_t)n)) == NULL) {
		cfg_nomem(ld);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		config_setting_t *a = config_setting_get_elem(s, (unsigned)i);
		if (config_setting_type(a) != CONFIG_TYPE_STRING) {
			cfg_error(ld, a,
			    "expected a string such as "
			    "\"192.168.10.0/24\" or \"group:disk\", got %s",
			    cfg_repr(a, got, sizeof got));
			return -1;
		}
		if (access_list_add(ex->allow, config_setting_get_string(a),
			err, sizeof err) == -1) {
			if (errno == ENOMEM)
				cfg_nomem(ld);
			else
				cfg_error(ld, a, "%s", err);
			return -1;
		}
	}
	return 0;
}

/* journal = { path; size; mode; } in an export: its write log
 * (docs/journal.md).  Whether the path can be opened is for wbd -n's
 * host checks and the start. */
static int
cfg_export_journal(struct cfg_load *ld, const config_setting_t *e,
    struct export_conf *ex)
{
	static const char *const keys[] = { "path", "size", "mode", "ordered",
		NULL };
	struct export_journal_conf *jc = &ex->journal;
	config_setting_t *g = config_setting_get_member(e, "journal"), *s;
	const char *str;
	char got[96];
	int r;

	if (!g)
		return 0;
	if (!config_setting_is_group(g)) {
		cfg_error(ld, g,
		    "expected a group such as journal = { path = "
		    "\"/var/lib/wbd/%s.wal\"; }, got %s",
		    ex->name, cfg_repr(g, got, sizeof got));
		return -1;
	}
	if (cfg_check_keys(ld, g, keys) == -1)
		return -1;
	if ((r = cfg_string(ld, g, "path", PATH_MAX, &str)) == -1)
		return -1;
	if (r == 0 || str[0] != '/') {
		cfg_error(ld, r ? config_setting_get_member(g, "path") : g,
		    "expected path = \"/absolute/path\", the file or block "
		    "device that holds export \"%s\"'s write log",
		    ex->name);
		return -1;
	}
	if (cfg_strdup(ld, str, &jc->path) == -1)
		return -1;
	jc->path_at = cfg_at(ld, config_setting_get_member(g, "path"));
	jc->size_bytes = CONFIG_JOURNAL_DEFAULT_BYTES;
	if ((r = cfg_size(ld, g, "size", &jc->size_bytes, NULL)) == -1)
		return -1;
	if (r == 1 && jc->size_bytes != 0 &&
	    (jc->size_bytes < CONFIG_JOURNAL_MIN_BYTES ||
		jc->size_bytes > EXPORT_MAX_BYTES)) {
		s = config_setting_get_member(g, "size");
		cfg_error(ld, s,
		    "expected 0 (an existing file or block device, used "
		    "whole) or a size "
		    "from %u bytes (two 4 KiB superblocks and 1 MiB of "
		    "records) below 8E, got %s",
		    CONFIG_JOURNAL_MIN_BYTES, cfg_repr(s, got, sizeof got));
		return -1;
	}
	jc->mode = JOURNAL_ON_FLUSH;
	if ((r = cfg_string(ld, g, "mode", 16, &str)) == -1)
		return -1;
	if (r == 1) {
		if (strcmp(str, "on-write") == 0) {
			jc->mode = JOURNAL_ON_WRITE;
		} else if (strcmp(str, "on-flush") != 0) {
			s = config_setting_get_member(g, "mode");
			cfg_error(ld, s,
			    "expected \"on-flush\" or \"on-write\", got %s",
			    cfg_repr(s, got, sizeof got));
			return -1;
		}
	}
	if (cfg_bool(ld, g, "ordered", &jc->ordered) == -1)
		return -1;
	if (ex->readonly) {
		cfg_error(ld, g,
		    "expected no journal on a read-only export (\"%s\"): "
		    "nothing is written to log",
		    ex->name);
		return -1;
	}
	return 0;
}

static int
cfg_export(struct cfg_load *ld, const config_setting_t *e,
    struct export_conf *ex)
{
	static const char *const keys[] = { "name", "description", "backing",
		"size", "readonly", "direct", "cache_mode", "tls", "allow",
		"journal", "idle_timeout_s", NULL };
	config_setting_t *s;
	const char *str;
	char got[96];
	int r;

	ex->line = (int)config_setting_source_line(e);
	if (cfg_check_keys(ld, e, keys) == -1)
		return -1;

	if ((r = cfg_string(ld, e, "name", NAME_MAX_BYTES, &str)) == -1)
		return -1;
	if (r == 0) {
		cfg_error(ld, e, "name is missing; expected name = \"...\", "
		    "the export name clients ask for");
		return -1;
	}
	if (!utf8_valid(str)) {
		/* The protocol's names are UTF-8, and wbctl's JSON too. */
		cfg_error(ld, config_setting_get_member(e, "name"),
		    "expected a name in UTF-8");
		return -1;
	}
	if (cfg_strdup(ld, str, &ex->name) == -1)
		return -1;

	if ((r = cfg_string(ld, e, "backing", PATH_MAX, &str)) == -1)
		return -1;
	if (r == 0) {
		cfg_error(ld, e, "backing is missing; expected backing = "
		    "\"/path/to/image\", the file or device behind \"%s\"",
		    ex->name);
		return -1;
	}
	if (cfg_strdup(ld, str, &ex->backing) == -1)
		return -1;
	ex->backing_at = cfg_at(ld, config_setting_get_member(e, "backing"));
	ex->size_at = cfg_at(ld, config_setting_get_member(e, "size"));

	if ((r = cfg_string(ld, e, "description", NAME_MAX_BYTES, &str)) == -1)
		return -1;
	if (r == 1 && !utf8_valid(str)) {
		cfg_error(ld, config_setting_get_member(e, "description"),
		    "expected a description in UTF-8");
		return -1;
	}
	if (r == 1 && cfg_strdup(ld, str, &ex->description) == -1)
		return -1;

	/* A kernel client idles for hours: its export (reached only by
	 * whom its allow list lets in) may have no idle timeout. */
	if ((r = cfg_uint(ld, e, "idle_timeout_s", 0, 86400,
		 &ex->idle_timeout_s)) == -1)
		return -1;
	ex->idle_timeout_set = r == 1;
	if (cfg_size(ld, e, "size", &ex->size_bytes, NULL) == -1 ||
	    cfg_bool(ld, e, "readonly", &ex->readonly) == -1 ||
	    (r = cfg_bool(ld, e, "direct", &ex->direct)) == -1)
		return -1;
	if (ex->size_bytes > EXPORT_MAX_BYTES) {
		s = config_setting_get_member(e, "size");
		cfg_error(ld, s,
		    "expected a size below 8E (the largest file "
		    "offset), got %s",
		    cfg_repr(s, got, sizeof got));
		return -1;
	}
	/* O_DIRECT is a flag of a local descriptor; a remote has none. */
	if (r == 1 && ex->direct && backend_is_uri(ex->backing)) {
		cfg_error(ld, config_setting_get_member(e, "direct"),
		    "expected false with an NBD backing (\"%s\"), got "
		    "true: O_DIRECT is for a local file or block device",
		    ex->backing);
		return -1;
	}

	ex->cache_mode = CACHE_WRITEBACK;
	if ((s = config_setting_get_member(e, "cache_mode")) != NULL &&
	    (config_setting_type(s) != CONFIG_TYPE_STRING ||
	    cache_mode_parse(config_setting_get_string(s),
	    &ex->cache_mode) == -1)) {
		cfg_error(ld, s, "expected \"writeback\", \"writethrough\" or "
		    "\"writethrough-until-flush\", got %s",
		    cfg_repr(s, got, sizeof got));
		return -1;
	}
	if ((r = cfg_string(ld, e, "tls", 16, &str)) == -1)
		return -1;
	if (r == 1) {
		s = config_setting_get_member(e, "tls");
		if (strcmp(str, "require") == 0) {
			ex->tls_require = true;
		} else if (strcmp(str, "optional") != 0) {
			cfg_error(ld, s,
			    "expected \"require\" or \"optional\", "
			    "got %s",
			    cfg_repr(s, got, sizeof got));
			return -1;
		}
	}
	if (cfg_export_journal(ld, e, ex) == -1)
		return -1;
	return cfg_allow(ld, e, ex);
}

/* tls = { mode; certificates; verify_peer; psk_file; priority; }: the
 * credentials are a directory or a PSK file, checked by loading them as
 * the daemon will. */
static int
cfg_tls(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg)
{
	struct tls_conf *tc = &cfg->tls;
	config_setting_t *g;
	char why[512];

	if (cfg_rows(ld, root, "tls", cfg) == -1)
		return -1;
	if ((g = config_setting_get_member(root, "tls")) == NULL)
		return 0;
	if (tc->certificates && tc->psk_file) {
		cfg_error(ld, config_setting_get_member(g, "psk_file"),
		    "expected either certificates or psk_file, not both: "
		    "they are alternatives");
		return -1;
	}
	if (tc->verify_peer && !tc->certificates) {
		cfg_error(ld, config_setting_get_member(g, "verify_peer"),
		    "expected verify_peer only with certificates (it checks a "
		    "client certificate against ca-cert.pem)");
		return -1;
	}
	if (tc->mode == TLS_OFF)
		return 0;
	if (!tc->certificates && !tc->psk_file) {
		/* Only a mode given can be other than off. */
		cfg_error(ld, config_setting_get_member(g, "mode"),
		    "expected certificates = \"/dir\" or "
		    "psk_file = \"/file\" with mode \"%s\"",
		    tls_mode_name(tc->mode));
		return -1;
	}
	/* Load them once to check them, as the daemon will. */
	struct tls_creds *cr = tls_creds_load(tc, why, sizeof why);
	if (!cr) {
		cfg_error(ld,
		    config_setting_get_member(g,
			tc->psk_file ? "psk_file" : "certificates"),
		    "%s", why);
		return -1;
	}
	tls_creds_unref(cr);
	return 0;
}

static int
cfg_exports(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg)
{
	config_setting_t *list, *e;
	char got[96];
	size_t i, j;
	int n;

	if ((list = config_setting_get_member(root, "exports")) == NULL) {
		cfg_error(ld, root, "exports: missing; at least one export "
		    "expected, such as exports = ( { name = \"disk0\"; "
		    "backing = \"/var/lib/wbd/disk0.img\"; } );");
		return -1;
	}
	if (!config_setting_is_list(list)) {
		cfg_error(ld, list, "expected a list of exports such as "
		    "( { name = \"disk0\"; backing = \"/path\"; } ), got %s",
		    cfg_repr(list, got, sizeof got));
		return -1;
	}
	if ((n = config_setting_length(list)) == 0) {
		cfg_error(ld, list, "at least one export expected, such as "
		    "( { name = \"disk0\"; backing = \"/path\"; } )");
		return -1;
	}
	if (n > CONFIG_MAX_EXPORTS) {
		cfg_error(ld, list, "expected at most %d exports, got %d",
		    CONFIG_MAX_EXPORTS, n);
		return -1;
	}
	if ((cfg->exports = calloc((size_t)n, sizeof *cfg->exports)) == NULL) {
		cfg_nomem(ld);
		return -1;
	}
	for (i = 0; i < (size_t)n; i++) {
		e = config_setting_get_elem(list, (unsigned)i);
		if (!config_setting_is_group(e)) {
			cfg_error(ld, e, "expected an export such as { name = "
			    "\"disk0\"; backing = \"/path\"; }, got %s",
			    cfg_repr(e, got, sizeof got));
			return -1;
		}
		/* Counted first, so config_free() sees what is half done. */
		cfg->n_exports++;
		if (cfg_export(ld, e, &cfg->exports[i]) == -1)
			return -1;
		for (j = 0; j < i; j++) {
			if (strcmp(cfg->exports[j].name,
			    cfg->exports[i].name) == 0) {
				cfg_error(ld, config_setting_get_member(e,
				    "name"), "expected a name not used "
				    "before, got \"%s\" again (first at "
				    "exports[%zu], line %d)",
				    cfg->exports[i].name, j,
				    cfg->exports[j].line);
				return -1;
			}
			/* One log, one export: two would overwrite each
			 * other's records. */
			const char *pj = cfg->exports[j].journal.path,
				   *pi = cfg->exports[i].journal.path;
			if (pi && pj && strcmp(pi, pj) == 0) {
				config_setting_t *g =
				    config_setting_get_member(e, "journal");
				cfg_error(ld,
				    config_setting_get_member(g, "path"),
				    "expected a journal path no other "
				    "export uses, got \"%s\" again (export "
				    "\"%s\", line %d)",
				    pi, cfg->exports[j].name,
				    cfg->exports[j].line);
				return -1;
			}
		}
	}
	return 0;
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

	if ((r = cfg_string(ld, root, "user", 255, &str)) == -1)
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

/* default_export = "NAME" or "none"; after the exports. */
static int
cfg_default_export(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg)
{
	const char *str;
	int r = cfg_string(ld, root, "default_export", NAME_MAX_BYTES, &str);

	if (r != 1)
		return r;
	bool known = strcmp(str, CONFIG_NO_DEFAULT_EXPORT) == 0;
	for (size_t i = 0; i < cfg->n_exports && !known; i++)
		known = strcmp(cfg->exports[i].name, str) == 0;
	if (!known) {
		cfg_error(ld, config_setting_get_member(root, "default_export"),
		    "expected the name of an export below, or \"none\", got "
		    "\"%.64s\"",
		    str);
		return -1;
	}
	return cfg_strdup(ld, str, &cfg->default_export);
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
	static const char *const keys[] = { "listen", "io_threads", "cache",
		"writeback", "control", "remote", "limits", "memory", "tls",
		"metrics", "user", "group", "exports", "default_export", NULL };

	if (cfg_files(ld, cfg) == -1 || cfg_check_keys(ld, root, keys) == -1 ||
	    cfg_listen(ld, root, cfg) == -1 ||
	    cfg_uint(ld, root, "io_threads", 0, IO_THREADS_MAX,
		&cfg->io_threads) == -1 ||
	    cfg_cache(ld, root, cfg) == -1 ||
	    cfg_writeback(ld, root, cfg) == -1 ||
	    cfg_control(ld, root, cfg) == -1 ||
	    cfg_rows(ld, root, "remote", cfg) == -1 ||
	    cfg_limits(ld, root, cfg) == -1 || cfg_tls(ld, root, cfg) == -1 ||
	    cfg_run_as(ld, root, &cfg->run_as) == -1 ||
	    cfg_rows(ld, root, "memory", cfg) == -1 ||
	    cfg_rows(ld, root, "metrics", cfg) == -1 ||
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
config_load(const char *path, struct wbd_config *cfg, char *err,
    size_t errlen)
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
	    &cfg->n_listen_tcp);
	cfg_free_listeners(&cfg->listen_unix, &cfg->listen_unix_at,
	    &cfg->n_listen_unix);
	for (i = 0; i < cfg->n_exports; i++) {
		free(cfg->exports[i].name);
		free(cfg->exports[i].description);
		free(cfg->exports[i].backing);
		free(cfg->exports[i].journal.path);
		access_list_unref(cfg->exports[i].allow);
	}
	free(cfg->exports);
	free(cfg->default_export);
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
