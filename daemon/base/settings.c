/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * settings.c - reading and writing the rows of the settings table
 * (settings-table.c), the rules between the writeback ones and the
 * threshold formula (see settings.h).  Pure: any thread, no state.
 * Making a set live is settings-apply.c's.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pool.h"
#include "settings.h"
#include "size.h"

/* "LO <= HI" rules between two rows of one scope. */
static const struct {
	const char *lo, *hi;
} settings_orders[] = {
	{ "min_workers", "max_workers" },
	{ "min_ratio", "max_ratio" },
};

const struct setting *
settings_lookup(const char *group, const char *name)
{
	for (size_t i = 0; i < settings_n; i++)
		if (strcmp(settings_table[i].group, group) == 0 &&
		    strcmp(settings_table[i].name, name) == 0)
			return &settings_table[i];
	return NULL;
}

const struct setting *
settings_find(const char *name)
{
	return settings_lookup("writeback", name);
}

const struct setting *
settings_group(const char *group, size_t *n)
{
	const struct setting *first = NULL;

	*n = 0;
	for (size_t i = 0; i < settings_n; i++) {
		if (strcmp(settings_table[i].group, group) != 0)
			continue;
		if (first == NULL)
			first = &settings_table[i];
		(*n)++;
	}
	return first;
}

uint64_t
settings_bit(const struct setting *s)
{
	const struct setting *first = s;

	while (first > settings_table && strcmp(first[-1].group, s->group) == 0)
		first--;
	return 1ull << (s - first);
}

/* The SIZE bytes at OFF of BASE: a bool, an unsigned or a uint64_t. */
static uint64_t
settings_field(const void *base, size_t off, size_t size)
{
	const char *p = (const char *)base + off;
	uint64_t v;
	uint32_t u;
	bool b;

	switch (size) {
	case sizeof v:
		memcpy(&v, p, sizeof v);
		return v;
	case sizeof u:
		memcpy(&u, p, sizeof u);
		return u;
	default:
		memcpy(&b, p, sizeof b);
		return b;
	}
}

static void
settings_field_set(void *base, size_t off, size_t size, uint64_t v)
{
	char *p = (char *)base + off;
	uint32_t u = (uint32_t)v;
	bool b = v != 0;

	switch (size) {
	case sizeof v:
		memcpy(p, &v, sizeof v);
		break;
	case sizeof u:
		memcpy(p, &u, sizeof u);
		break;
	default:
		memcpy(p, &b, sizeof b);
		break;
	}
}

uint64_t
settings_load(const struct setting *s, const void *conf)
{
	return settings_field(conf, s->offset, s->size);
}

void
settings_store(const struct setting *s, void *conf, uint64_t v)
{
	const struct setting *pair =
	    s->pair ? settings_lookup(s->group, s->pair) : NULL;

	settings_field_set(conf, s->offset, s->size, v);
	if (pair != NULL)
		settings_field_set(conf, pair->offset, pair->size, 0);
}

uint64_t
settings_get(const struct setting *s, const struct writeback_conf *wc)
{
	return settings_load(s, wc);
}

void
settings_set(const struct setting *s, struct writeback_conf *wc, uint64_t v)
{
	settings_store(s, wc, v);
}

uint64_t
settings_get_dev(const struct setting *s, const struct device_conf *dc)
{
	return settings_field(dc, s->dev_offset, sizeof dc->min_ratio);
}

void
settings_set_dev(const struct setting *s, struct device_conf *dc, uint64_t v)
{
	settings_field_set(dc, s->dev_offset, sizeof dc->min_ratio, v);
}

bool
settings_in_use(const struct setting *s, const struct writeback_conf *wc)
{
	if (s->pair == NULL)
		return true;
	if (s->type == SETTING_BYTES)
		return settings_get(s, wc) != 0;
	return settings_get(settings_find(s->pair), wc) == 0;
}

json_t *
settings_json(const struct setting *s, const struct writeback_conf *wc)
{
	if (!settings_in_use(s, wc))
		return json_null();
	return json_integer((json_int_t)settings_get(s, wc));
}

bool
settings_valid(const struct setting *s, uint64_t v, uint32_t page_size)
{
	if (v < s->min || v > s->max)
		return false;
	if (s->type == SETTING_IO_BYTES && v < page_size)
		return false;
	if (s->type == SETTING_IO_BYTES || s->type == SETTING_POW2)
		return (v & (v - 1)) == 0;
	return true;
}

uint64_t
settings_threshold_pages(const struct threshold *t, uint64_t total_pages,
    uint32_t page_size)
{
	if (t->bytes)
		return (t->bytes + page_size - 1) / page_size;
	return total_pages * t->ratio_pct / 100;
}

static int __attribute__((format(printf, 4, 5)))
settings_fail(struct settings_err *e, const struct setting *row, ssize_t dev,
    const char *fmt, ...)
{
	va_list ap;

	e->row = row;
	e->dev = dev;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	errno = EINVAL;
	return -1;
}

/* A threshold for a message: "30", "64M", "20% of the cache, 51.2 MiB". */
static const char *
settings_threshold_desc(const struct threshold *t, bool both_ratios,
    const struct settings_env *env, bool given, char *buf, size_t len)
{
	char a[32];
	int n;

	if (t->bytes != 0)
		n = snprintf(buf, len, "%s", size_format(t->bytes, a, sizeof a));
	else if (both_ratios)
		n = snprintf(buf, len, "%u", t->ratio_pct);
	else
		n = snprintf(buf, len, "%u%% of the cache, %s", t->ratio_pct,
		    size_human(settings_threshold_pages(t, env->total_pages,
		    env->page_size) * env->page_size, a, sizeof a));
	if (!given && n >= 0 && (size_t)n < len)
		snprintf(buf + n, len - n, ", %s", env->kept);
	return buf;
}

/* Background writeback must start below the level that holds writers. */
static int
settings_check_thresholds(const struct writeback_conf *wc,
    const struct settings_env *env, uint64_t given, struct settings_err *e)
{
	const struct threshold *bg = &wc->dirty_background, *dirty = &wc->dirty;
	const struct setting *bg_row = settings_find(bg->bytes ?
	    "dirty_background_bytes" : "dirty_background_ratio");
	const struct setting *dirty_row = settings_find(dirty->bytes ?
	    "dirty_bytes" : "dirty_ratio");
	bool ratios = bg->bytes == 0 && dirty->bytes == 0;
	bool bg_given = (given & settings_bit(bg_row)) != 0;
	uint64_t bg_pages, dirty_pages;
	char d1[96], d2[96], same[64] = "";

	bg_pages = settings_threshold_pages(bg, env->total_pages,
	    env->page_size);
	dirty_pages = settings_threshold_pages(dirty, env->total_pages,
	    env->page_size);
	if (ratios ? bg->ratio_pct < dirty->ratio_pct : bg_pages < dirty_pages)
		return 0;
	settings_threshold_desc(bg, ratios, env, bg_given, d1, sizeof d1);
	settings_threshold_desc(dirty, ratios, env,
	    (given & settings_bit(dirty_row)) != 0, d2, sizeof d2);
	if (!ratios && bg_pages == dirty_pages)
		snprintf(same, sizeof same, " (both are %llu pages of %u bytes)",
		    (unsigned long long)bg_pages, env->page_size);
	if (bg_given || !(given & settings_bit(dirty_row)))
		return settings_fail(e, bg_row, -1, "expected less than %s%s "
		    "(%s), got %s%s", env->prefix, dirty_row->name, d2, d1,
		    same);
	return settings_fail(e, dirty_row, -1, "expected more than %s%s (%s), "
	    "got %s%s", env->prefix, bg_row->name, d1, d2, same);
}

int
settings_check(const struct writeback_conf *wc,
    const struct device_conf *devs, size_t n_devs,
    const struct settings_env *env, uint64_t given, struct settings_err *e)
{
	const struct setting *s, *lo, *hi;
	unsigned sum_min = 0, min, max;
	uint64_t vlo, vhi;

	/* A threshold is a ratio or a size, not both. */
	for (s = settings_table; s < settings_table + settings_n; s++)
		if (s->type == SETTING_BYTES && s->pair != NULL &&
		    (given & settings_bit(s)) &&
		    (given & settings_bit(settings_find(s->pair))))
			return settings_fail(e, s, -1, "expected either %s or "
			    "%s, not both", s->pair, s->name);
	if (settings_check_thresholds(wc, env, given, e) == -1)
		return -1;
	for (size_t i = 0; i < sizeof settings_orders /
	    sizeof settings_orders[0]; i++) {
		lo = settings_find(settings_orders[i].lo);
		hi = settings_find(settings_orders[i].hi);
		vlo = settings_get(lo, wc);
		vhi = settings_get(hi, wc);
		if (vlo <= vhi)
			continue;
		if (given & settings_bit(hi))
			return settings_fail(e, hi, -1, "expected at least "
			    "%s%s (%llu%s%s), got %llu", env->prefix, lo->name,
			    (unsigned long long)vlo,
			    given & settings_bit(lo) ? "" : ", ",
			    given & settings_bit(lo) ? "" : env->kept,
			    (unsigned long long)vhi);
		return settings_fail(e, lo, -1, "expected at most %s%s "
		    "(%llu%s%s), got %llu", env->prefix, hi->name,
		    (unsigned long long)vhi, given & settings_bit(hi) ? "" : ", ",
		    given & settings_bit(hi) ? "" : env->kept,
		    (unsigned long long)vlo);
	}
	/* Each device's share, as the kernel's bdi min_ratio/max_ratio. */
	for (size_t i = 0; i < n_devs; i++) {
		min = devs[i].min_ratio;
		max = devs[i].max_ratio;
		if (min > max)
			return settings_fail(e, NULL, (ssize_t)i, "min_ratio (%u) "
			    "above max_ratio (%u)", min, max);
		sum_min += min;
		if (sum_min > 100)
			return settings_fail(e, NULL, (ssize_t)i, "the devices' "
			    "min_ratio add up to more than 100 (%u)", sum_min);
	}
	return 0;
}

void
settings_pool_params(const struct writeback_conf *wc, struct pool_params *pp)
{
	*pp = (struct pool_params){
		.min_workers = wc->min_workers,
		.max_workers = wc->max_workers,
		.grow_delay_ms = wc->worker_spawn_ms,
		.idle_timeout_ms = wc->worker_idle_ms,
	};
}
