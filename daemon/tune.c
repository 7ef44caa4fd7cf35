/*
 * tune.c - the tunables wbctl can read and set at run time: the table of
 * keys, their units and rules (the configuration file's), and applying a
 * validated set.  Runs on the control thread under d->tune_lock; the new
 * values reach other threads through atomic stores (wb_ctl_update,
 * pool_set_params, the device ratios, the export's cache mode).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "ctl.h"
#include "daemon.h"
#include "export.h"
#include "size.h"
#include "wbdev.h"
#include "writeback.h"

enum tune_kind { T_RATIO, T_BYTES, T_UINT };

struct tunable {
	const char *key;
	enum tune_kind kind;
	const char *unit;
	unsigned min, max;
	const char *description;
};

static const struct tunable tunables[] = {
	{ "dirty_background_ratio", T_RATIO, "%", 0, 100,
	  "background writeback starts above this share of the cache" },
	{ "dirty_background_bytes", T_BYTES, "bytes", 0, 0,
	  "background writeback starts above this much dirty data" },
	{ "dirty_ratio", T_RATIO, "%", 0, 100,
	  "writers are held at this share of the cache" },
	{ "dirty_bytes", T_BYTES, "bytes", 0, 0,
	  "writers are held at this much dirty data" },
	{ "dirty_expire_centisecs", T_UINT, "centisecs", 0, INT_MAX,
	  "periodic writeback writes pages dirty for longer than this" },
	{ "dirty_writeback_centisecs", T_UINT, "centisecs", 0, INT_MAX,
	  "how often periodic writeback runs (0: never)" },
	{ "min_workers", T_UINT, "threads", 1, 64,
	  "flush-MAJ:MIN threads kept per device" },
	{ "max_workers", T_UINT, "threads", 1, 64,
	  "flush-MAJ:MIN threads at most per device" },
	{ "worker_spawn_ms", T_UINT, "ms", 1, 600000,
	  "work waiting this long on busy workers adds a worker" },
	{ "worker_idle_ms", T_UINT, "ms", 1, 3600000,
	  "a worker idle this long exits (above min_workers)" },
};

#define N_TUNABLES (sizeof tunables / sizeof tunables[0])

static json_t *
tune_entry(const char *key, json_t *value, const char *unit,
    const char *scope, const char *desc)
{
	return json_pack("{s:s, s:o, s:s, s:s, s:s}", "key", key, "value", value,
	    "unit", unit, "scope", scope, "description", desc);
}

static json_t *
tune_value(const struct writeback_conf *wc, const struct tunable *t)
{
	const char *k = t->key;

	/* Of a threshold's two forms, the one not in use is null. */
	if (!strcmp(k, "dirty_background_ratio"))
		return wc->dirty_background.bytes ? json_null() :
		    json_integer(wc->dirty_background.ratio_pct);
	if (!strcmp(k, "dirty_background_bytes"))
		return wc->dirty_background.bytes ? json_integer(
		    (json_int_t)wc->dirty_background.bytes) : json_null();
	if (!strcmp(k, "dirty_ratio"))
		return wc->dirty.bytes ? json_null() :
		    json_integer(wc->dirty.ratio_pct);
	if (!strcmp(k, "dirty_bytes"))
		return wc->dirty.bytes ? json_integer(
		    (json_int_t)wc->dirty.bytes) : json_null();
	if (!strcmp(k, "dirty_expire_centisecs"))
		return json_integer(wc->dirty_expire_centisecs);
	if (!strcmp(k, "dirty_writeback_centisecs"))
		return json_integer(wc->dirty_writeback_centisecs);
	if (!strcmp(k, "min_workers"))
		return json_integer(wc->min_workers);
	if (!strcmp(k, "max_workers"))
		return json_integer(wc->max_workers);
	if (!strcmp(k, "worker_spawn_ms"))
		return json_integer(wc->worker_spawn_ms);
	return json_integer(wc->worker_idle_ms);
}

json_t *
tune_list_json(struct daemon *d)
{
	json_t *a = json_array();

	pthread_mutex_lock(&d->tune_lock);
	for (size_t i = 0; i < N_TUNABLES; i++)
		json_array_append_new(a, tune_entry(tunables[i].key,
		    tune_value(&d->cfg.writeback, &tunables[i]), tunables[i].unit,
		    "global", tunables[i].description));
	for (size_t i = 0; i < daemon_n_devs(d); i++) {
		struct wb_dev *dev = d->devs[i];
		char key[64];
		snprintf(key, sizeof key, "device.%s.min_ratio", dev->name);
		json_array_append_new(a, tune_entry(key, json_integer(
		    dev->min_ratio), "%", "device",
		    "share of the dirty limit this device is guaranteed"));
		snprintf(key, sizeof key, "device.%s.max_ratio", dev->name);
		json_array_append_new(a, tune_entry(key, json_integer(
		    dev->max_ratio), "%", "device",
		    "share of the dirty limit this device may hold"));
	}
	for (size_t i = 0; i < daemon_n_exports(d); i++) {
		struct export *e = d->exports.v[i];
		char key[4200];
		if (export_retired(e))
			continue;
		snprintf(key, sizeof key, "export.%s.cache_mode", e->name);
		json_array_append_new(a, tune_entry(key, json_string(
		    cache_mode_name(e->cache_mode)), "", "export",
		    "writeback, writethrough or writethrough-until-flush"));
	}
	pthread_mutex_unlock(&d->tune_lock);
	return a;
}

/* A value as text: JSON strings as they are, numbers printed. */
static int
tune_text(json_t *v, char *buf, size_t len)
{
	if (json_is_string(v))
		snprintf(buf, len, "%s", json_string_value(v));
	else if (json_is_integer(v) && json_integer_value(v) >= 0)
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
	else
		return -1;
	return 0;
}

static int
tune_parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* Staged changes, applied only when every key is valid. */
struct tune_stage {
	struct writeback_conf wc;
	unsigned *dev_min, *dev_max;            /* per d->devs */
	enum cache_mode *modes;                 /* per d->exports */
};

static int
tune_one(struct daemon *d, struct tune_stage *st, const char *key,
    json_t *jv, char *err, size_t errlen)
{
	char val[128];

	if (tune_text(jv, val, sizeof val) < 0) {
		snprintf(err, errlen, "%s: expected a string or a non-negative "
		    "integer", key);
		return -1;
	}
	for (size_t i = 0; i < N_TUNABLES; i++) {
		const struct tunable *t = &tunables[i];
		unsigned u;
		uint64_t b;
		if (strcmp(key, t->key) != 0)
			continue;
		if (t->kind == T_BYTES) {
			if (size_parse(val, &b) < 0 || b == 0) {
				snprintf(err, errlen, "%s: expected a size such "
				    "as \"64M\" above 0, got \"%s\"", key, val);
				return -1;
			}
		} else if (tune_parse_uint(val, t->min, t->max, &u) < 0) {
			snprintf(err, errlen, "%s: expected an integer from %u "
			    "to %u (%s), got \"%s\"", key, t->min, t->max,
			    t->unit, val);
			return -1;
		}
		struct writeback_conf *wc = &st->wc;
		/* Setting a ratio clears the bytes form, and vice versa. */
		if (!strcmp(key, "dirty_background_ratio"))
			wc->dirty_background = (struct threshold){ u, 0 };
		else if (!strcmp(key, "dirty_background_bytes"))
			wc->dirty_background = (struct threshold){ 0, b };
		else if (!strcmp(key, "dirty_ratio"))
			wc->dirty = (struct threshold){ u, 0 };
		else if (!strcmp(key, "dirty_bytes"))
			wc->dirty = (struct threshold){ 0, b };
		else if (!strcmp(key, "dirty_expire_centisecs"))
			wc->dirty_expire_centisecs = u;
		else if (!strcmp(key, "dirty_writeback_centisecs"))
			wc->dirty_writeback_centisecs = u;
		else if (!strcmp(key, "min_workers"))
			wc->min_workers = u;
		else if (!strcmp(key, "max_workers"))
			wc->max_workers = u;
		else if (!strcmp(key, "worker_spawn_ms"))
			wc->worker_spawn_ms = u;
		else
			wc->worker_idle_ms = u;
		return 0;
	}
	if (!strncmp(key, "device.", 7)) {
		const char *name = key + 7, *dot = strrchr(name, '.');
		for (size_t i = 0; dot && i < daemon_n_devs(d); i++) {
			if (strlen(d->devs[i]->name) != (size_t)(dot - name) ||
			    strncmp(d->devs[i]->name, name, dot - name))
				continue;
			unsigned u;
			bool is_min = !strcmp(dot, ".min_ratio");
			if (!is_min && strcmp(dot, ".max_ratio"))
				break;
			if (tune_parse_uint(val, is_min ? 0 : 1, 100, &u) < 0) {
				snprintf(err, errlen, "%s: expected an integer "
				    "from %u to 100 (%%), got \"%s\"", key,
				    is_min ? 0 : 1, val);
				return -1;
			}
			*(is_min ? &st->dev_min[i] : &st->dev_max[i]) = u;
			return 0;
		}
	}
	if (!strncmp(key, "export.", 7)) {
		const char *name = key + 7, *dot = strrchr(name, '.');
		for (size_t i = 0; dot && !strcmp(dot, ".cache_mode") &&
		    i < daemon_n_exports(d); i++) {
			if (strlen(d->exports.v[i]->name) != (size_t)(dot - name) ||
			    strncmp(d->exports.v[i]->name, name, dot - name))
				continue;
			if (cache_mode_parse(val, &st->modes[i]) < 0) {
				snprintf(err, errlen, "%s: expected writeback, "
				    "writethrough or writethrough-until-flush, "
				    "got \"%s\"", key, val);
				return -1;
			}
			return 0;
		}
	}
	snprintf(err, errlen, "%s: unknown key (see \"wbctl tune\" for the "
	    "list)", key);
	return -1;
}

static void
tune_apply(struct daemon *d, struct tune_stage *st)
{
	struct pool_params pp = {
		.min_workers = st->wc.min_workers,
		.max_workers = st->wc.max_workers,
		.grow_delay_ms = st->wc.worker_spawn_ms,
		.idle_timeout_ms = st->wc.worker_idle_ms,
	};
	struct cache_stats cs;

	/* Only the scalar fields: the devices list stays as it is. */
	struct device_conf *devs = d->cfg.writeback.devices;
	size_t n = d->cfg.writeback.n_devices;
	d->cfg.writeback = st->wc;
	d->cfg.writeback.devices = devs;
	d->cfg.writeback.n_devices = n;
	wb_ctl_update(&d->wb, &d->cfg.writeback);
	for (size_t i = 0; i < daemon_n_devs(d); i++) {
		struct wb_dev *dev = d->devs[i];
		pool_set_params(dev->pool, &pp);
		__atomic_store_n(&dev->min_ratio, st->dev_min[i], __ATOMIC_RELAXED);
		__atomic_store_n(&dev->max_ratio, st->dev_max[i], __ATOMIC_RELAXED);
	}
	for (size_t i = 0; i < daemon_n_exports(d); i++)
		__atomic_store_n(&d->exports.v[i]->cache_mode, st->modes[i],
		    __ATOMIC_RELAXED);
	/* A lower background threshold starts writeback now. */
	cache_get_stats(d->cache, &cs);
	for (size_t i = 0; i < daemon_n_devs(d); i++)
		if (cs.dirty_pages > d->wb.bg_pages ||
		    wb_dev_dirty_pages(d->devs[i]) >
		    d->wb.bg_pages * d->devs[i]->max_ratio / 100)
			wb_kick_background(d->devs[i]);
}

int
tune_set(struct daemon *d, json_t *set, json_t *changed, char *err,
    size_t errlen)
{
	struct tune_stage st;
	const char *key;
	json_t *v;
	int r = -1;

	if (!json_is_object(set) || json_object_size(set) == 0) {
		snprintf(err, errlen, "\"set\": expected an object of KEY: VALUE");
		return -1;
	}
	pthread_mutex_lock(&d->tune_lock);
	st.wc = d->cfg.writeback;
	st.dev_min = calloc(d->n_devs + 1, sizeof *st.dev_min);
	st.dev_max = calloc(d->n_devs + 1, sizeof *st.dev_max);
	st.modes = calloc(d->exports.n + 1, sizeof *st.modes);
	if (!st.dev_min || !st.dev_max || !st.modes) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < daemon_n_devs(d); i++) {
		st.dev_min[i] = d->devs[i]->min_ratio;
		st.dev_max[i] = d->devs[i]->max_ratio;
	}
	for (size_t i = 0; i < daemon_n_exports(d); i++)
		st.modes[i] = d->exports.v[i]->cache_mode;

	json_object_foreach(set, key, v)
		if (tune_one(d, &st, key, v, err, errlen) < 0)
			goto out;

	/* The rules across keys, as in the configuration file. */
	if (st.wc.min_workers > st.wc.max_workers) {
		snprintf(err, errlen, "min_workers (%u) above max_workers (%u)",
		    st.wc.min_workers, st.wc.max_workers);
		goto out;
	}
	uint64_t cache_bytes = d->wb.total_pages * d->wb.page_size;
	uint64_t bg = st.wc.dirty_background.bytes ?
	    st.wc.dirty_background.bytes :
	    cache_bytes * st.wc.dirty_background.ratio_pct / 100;
	uint64_t lim = st.wc.dirty.bytes ? st.wc.dirty.bytes :
	    cache_bytes * st.wc.dirty.ratio_pct / 100;
	if (bg >= lim) {
		snprintf(err, errlen, "the background threshold (%llu bytes) "
		    "must stay below the dirty limit (%llu bytes)",
		    (unsigned long long)bg, (unsigned long long)lim);
		goto out;
	}
	unsigned sum_min = 0;
	for (size_t i = 0; i < daemon_n_devs(d); i++) {
		if (st.dev_min[i] > st.dev_max[i]) {
			snprintf(err, errlen, "device %s: min_ratio (%u) above "
			    "max_ratio (%u)", d->devs[i]->name, st.dev_min[i],
			    st.dev_max[i]);
			goto out;
		}
		sum_min += st.dev_min[i];
	}
	if (sum_min > 100) {
		snprintf(err, errlen, "the devices' min_ratio add up to %u, "
		    "more than 100", sum_min);
		goto out;
	}
	tune_apply(d, &st);
	json_object_foreach(set, key, v) {
		static const char *const pairs[][2] = {
			{ "dirty_background_ratio", "dirty_background_bytes" },
			{ "dirty_ratio", "dirty_bytes" },
		};
		json_array_append_new(changed, json_string(key));
		/* Setting one form of a threshold clears the other. */
		for (size_t i = 0; i < 2; i++)
			for (size_t j = 0; j < 2; j++)
				if (!strcmp(key, pairs[i][j]) &&
				    !json_object_get(set, pairs[i][!j]))
					json_array_append_new(changed,
					    json_string(pairs[i][!j]));
	}
	r = 0;
out:
	pthread_mutex_unlock(&d->tune_lock);
	free(st.dev_min);
	free(st.dev_max);
	free(st.modes);
	return r;
}
