/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tune.c - wbctl tune: listing and setting at run time the rows of the
 * settings table that change at run time (settings.c), each device's
 * ratios and each export's cache mode.  A set is staged, checked with the
 * configuration file's rules (settings_check) and made live in one go
 * (settings_apply).  Runs on the control thread under d->tune_lock; the
 * new values reach other threads through atomic stores.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomics.h"
#include "config-load.h"
#include "ctl.h"
#include "daemon.h"
#include "export.h"
#include "settings.h"
#include "settings-apply.h"
#include "size.h"
#include "wbdev.h"

static json_t *
tune_entry(const char *key, json_t *value, const char *unit,
    const char *scope, const char *desc)
{
	return json_pack("{s:s, s:o, s:s, s:s, s:s}", "key", key, "value", value,
	    "unit", unit, "scope", scope, "description", desc);
}

json_t *
tune_list_json(struct daemon *d)
{
	const struct setting *s;
	struct export *e;
	json_t *a = json_array();

	pthread_mutex_lock(&d->tune_lock);
	for (s = settings_table; s < settings_table + settings_n; s++)
		if (s->runtime && s->scope == SETTING_GLOBAL)
			json_array_append_new(a, tune_entry(s->name,
			    settings_json(s, &d->cfg.writeback), s->unit,
			    "global", s->doc));
	for (size_t i = 0; i < daemon_n_devs(d); i++) {
		struct wb_dev *dev = d->devs[i];
		struct device_conf dc = {
			.min_ratio = load_relaxed(&dev->min_ratio),
			.max_ratio = load_relaxed(&dev->max_ratio),
		};
		char key[64];

		for (s = settings_table; s < settings_table + settings_n; s++) {
			if (!s->runtime || s->scope != SETTING_DEVICE)
				continue;
			snprintf(key, sizeof key, "device.%s.%s", dev->name,
			    s->name);
			json_array_append_new(a, tune_entry(key, json_integer(
			    (json_int_t)settings_get_dev(s, &dc)), s->unit,
			    "device", s->doc));
		}
	}
	export_table_foreach(&d->exports, i, e) {
		char key[4200];
		if (export_retired(e))
			continue;
		snprintf(key, sizeof key, "export.%s.cache_mode", e->name);
		json_array_append_new(a,
		    tune_entry(key,
			json_string(
			    cache_mode_name(load_relaxed(&e->cache_mode))),
			"", "export",
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
	struct device_conf *devs;               /* per d->devs: the ratios */
	enum cache_mode *modes;                 /* per d->exports */
	uint64_t given;                         /* settings_bit of each row */
};

/* VAL for row S, or -1 after writing why into ERR. */
static int
tune_parse(const struct setting *s, const char *key, const char *val,
    uint32_t page_size, uint64_t *out, char *err, size_t errlen)
{
	char a[32], b[32];
	unsigned u;

	if (s->type == SETTING_UINT || s->type == SETTING_RATIO) {
		if (tune_parse_uint(val, (unsigned)s->min, (unsigned)s->max,
		    &u) == 0) {
			*out = u;
			return 0;
		}
		snprintf(err, errlen, "%s: expected an integer from %u to %u "
		    "(%s), got \"%s\"", key, (unsigned)s->min,
		    (unsigned)s->max, s->unit, val);
		return -1;
	}
	if (size_parse(val, out) == 0 && settings_valid(s, *out, page_size))
		return 0;
	if (s->type == SETTING_IO_BYTES)
		snprintf(err, errlen, "%s: expected a power of two from %s to "
		    "%s, got \"%s\"", key, size_format(page_size, a, sizeof a),
		    size_format(s->max, b, sizeof b), val);
	else
		snprintf(err, errlen, "%s: expected a size such as \"64M\" "
		    "above 0, got \"%s\"", key, val);
	return -1;
}

/* One "[device.MAJ:MIN.|export.NAME.]KEY": VALUE into the stage. */
static int
tune_one(struct daemon *d, struct tune_stage *st, const char *key,
    json_t *jv, char *err, size_t errlen)
{
	const struct setting *s;
	char val[128];
	uint64_t v;

	if (tune_text(jv, val, sizeof val) < 0) {
		snprintf(err, errlen, "%s: expected a string or a non-negative "
		    "integer", key);
		return -1;
	}
	if ((s = settings_find(key)) != NULL && s->runtime &&
	    s->scope == SETTING_GLOBAL) {
		if (tune_parse(s, key, val, d->wb.page_size, &v, err,
		    errlen) == -1)
			return -1;
		settings_set(s, &st->wc, v);
		st->given |= settings_bit(s);
		return 0;
	}
	if (!strncmp(key, "device.", 7)) {
		const char *name = key + 7, *dot = strrchr(name, '.');
		for (size_t i = 0; dot && i < daemon_n_devs(d); i++) {
			if (strlen(d->devs[i]->name) != (size_t)(dot - name) ||
			    strncmp(d->devs[i]->name, name, dot - name))
				continue;
			s = settings_find(dot + 1);
			if (s == NULL || !s->runtime ||
			    s->scope != SETTING_DEVICE)
				break;
			if (tune_parse(s, key, val, d->wb.page_size, &v, err,
			    errlen) == -1)
				return -1;
			settings_set_dev(s, &st->devs[i], v);
			return 0;
		}
	}
	if (!strncmp(key, "export.", 7)) {
		const char *name = key + 7, *dot = strrchr(name, '.');
		struct export *e;
		export_table_foreach(&d->exports, i, e) {
			if (!dot || strcmp(dot, ".cache_mode") != 0)
				break;
			if (export_retired(e) ||
			    strlen(e->name) != (size_t)(dot - name) ||
			    strncmp(e->name, name, dot - name))
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

int
tune_set(struct daemon *d, json_t *set, json_t *changed, char *err,
    size_t errlen)
{
	struct settings_env env = {
		.total_pages = d->wb.total_pages,
		.page_size = d->wb.page_size,
		.prefix = "",
		.kept = "the current value",
	};
	struct tune_stage st = { .given = 0 };
	struct settings_err e;
	const struct setting *s;
	struct export *ex;
	const char *key;
	json_t *v;
	int r = -1;

	if (!json_is_object(set) || json_object_size(set) == 0) {
		snprintf(err, errlen, "\"set\": expected an object of KEY: VALUE");
		return -1;
	}
	pthread_mutex_lock(&d->tune_lock);
	st.wc = d->cfg.writeback;
	st.devs = calloc(load_relaxed(&d->n_devs) + 1, sizeof *st.devs);
	st.modes =
	    calloc(export_table_count(&d->exports) + 1, sizeof *st.modes);
	if (!st.devs || !st.modes) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < daemon_n_devs(d); i++) {
		st.devs[i].device = d->devs[i]->name;
		st.devs[i].min_ratio = load_relaxed(&d->devs[i]->min_ratio);
		st.devs[i].max_ratio = load_relaxed(&d->devs[i]->max_ratio);
	}
	export_table_foreach(&d->exports, i, ex)
		st.modes[i] = load_relaxed(&ex->cache_mode);

	json_object_foreach(set, key, v)
		if (tune_one(d, &st, key, v, err, errlen) < 0)
			goto out;
	if (settings_check(&st.wc, st.devs, daemon_n_devs(d), &env, st.given,
	    &e) == -1) {
		if (e.dev >= 0)
			snprintf(err, errlen, "device %s: %s",
			    st.devs[e.dev].device, e.msg);
		else
			snprintf(err, errlen, "%s: %s", e.row->name, e.msg);
		goto out;
	}

	settings_apply(d, &st.wc, st.devs);
	export_table_foreach(&d->exports, i, ex)
		store_relaxed(&ex->cache_mode, st.modes[i]);
	json_object_foreach(set, key, v) {
		json_array_append_new(changed, json_string(key));
		/* Setting one form of a threshold clears the other. */
		if ((s = settings_find(key)) != NULL && s->pair != NULL &&
		    !json_object_get(set, s->pair))
			json_array_append_new(changed, json_string(s->pair));
	}
	r = 0;
out:
	pthread_mutex_unlock(&d->tune_lock);
	free(st.devs);
	free(st.modes);
	return r;
}
