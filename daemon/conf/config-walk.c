/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * config-walk.c - the groups of wbd.conf that are rows of the settings
 * table (base/settings-table.c): cache, writeback, control, remote,
 * limits, tls, memory and metrics.  A group is read by one walk over its
 * rows (cfg_walk); a key checked against this machine or another row by a
 * hook (cfg_hooks); what is checked between the keys of a group after the
 * walk (the reserve, the writeback rules, the TLS credentials loaded as
 * the daemon will) by the group's own function.  Called by config.c's
 * cfg_read, on the thread that loads the file; no state, no lock.
 */

#include <errno.h>
#include <grp.h>
#include <libconfig.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cfgread.h"
#include "config-internal.h"
#include "config-load.h"
#include "settings.h"
#include "size.h"
#include "tls.h"

/* A cache above this share of RAM is accepted with a warning. */
#define CACHE_WARN_PCT 75u

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
			cfg_error(ld, s,
			    "expected a size in bytes: the amount "
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
		cfg_error(ld, s,
		    "expected cache.size to hold at least one page "
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
 * after the others.  A row by_hand is the caller's (it is among EXTRA).  The bit of each row given is set in *GIVEN (may be
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
		if (!row->by_hand)
			keys[n_keys++] = row->name;
	for (; extra != NULL && *extra != NULL; extra++)
		keys[n_keys++] = *extra;
	keys[n_keys] = NULL;
	if (cfg_check_keys(ld, g, keys) == -1)
		return -1;
	for (int late = 0; late <= 1; late++) {
		for (row = first; row != NULL && row < first + n; row++) {
			if (row->late != late || row->by_hand)
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
int
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
int
cfg_cache(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg)
{
	return cfg_rows(ld, root, "cache", cfg);
}

/* control = { socket; mode; group; admin_group; max_clients; ... }: the
 * last slots kept for the admins leave one for anyone. */
int
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
int
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

	if (wb == NULL ||
	    (list = config_setting_get_member(wb, "devices")) == NULL)
		return 0;
	if (!config_setting_is_list(list) && !config_setting_is_array(list)) {
		cfg_error(ld, list,
		    "expected a list of groups such as "
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
		config_setting_t *g =
		    config_setting_get_elem(list, (unsigned)i);
		struct device_conf *dc = &wc->devices[wc->n_devices];
		const char *name;
		unsigned maj, min;
		char extra;

		if (!config_setting_is_group(g)) {
			cfg_error(ld, g,
			    "expected a group such as "
			    "{ device = \"8:0\"; max_ratio = 50; }, got %s",
			    cfg_repr(g, got, sizeof got));
			return -1;
		}
		if (cfg_check_keys(ld, g, keys) == -1)
			return -1;
		dc->line = (int)config_setting_source_line(g);
		if (!config_setting_lookup_string(g, "device", &name) ||
		    sscanf(name, "%u:%u%c", &maj, &min, &extra) != 2) {
			config_setting_t *s =
			    config_setting_get_member(g, "device");
			cfg_error(ld, s ? s : g,
			    "expected device = \"MAJ:MIN\" "
			    "(as in /proc/PID/task/*/comm flush-MAJ:MIN)%s%s",
			    s ? ", got " : "",
			    s ? cfg_repr(s, got, sizeof got) : "");
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
int
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
	if (settings_check(wc, wc->devices, wc->n_devices, &env, given, &e) ==
	    0)
		return 0;
	if (e.dev >= 0) {
		/* A device's min_ratio is the one at fault, if it gave one. */
		list = config_setting_get_member(wb, "devices");
		dev = config_setting_get_elem(list, (unsigned)e.dev);
		if ((s = config_setting_get_member(dev, "min_ratio")) == NULL)
			s = config_setting_get_member(dev, "max_ratio");
		cfg_error(ld, s ? s : dev, "%s", e.msg);
	} else {
		cfg_error(ld,
		    wb ? config_setting_get_member(wb, e.row->name) : NULL,
		    "%s", e.msg);
	}
	return -1;
}

/* tls = { mode; certificates; verify_peer; psk_file; priority; }: the
 * credentials are a directory or a PSK file, checked by loading them as
 * the daemon will. */
int
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
