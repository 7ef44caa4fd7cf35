/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-settings.c - the settings table (settings.c): every row well
 * formed, the one threshold formula and its rounding, the rules between
 * keys, and the configuration file, wbctl tune and the writeback
 * thresholds agreeing at the edge where a threshold becomes whole pages.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config-load.h"
#include "ctl.h"
#include "daemon.h"
#include "settings.h"
#include "writeback.h"

#define PAGE            4096u
#define CACHE_PAGES     65536u          /* the 256M default cache */

static const struct settings_env file_env = {
	.total_pages = CACHE_PAGES,
	.page_size = PAGE,
	.prefix = "writeback.",
	.kept = "the default",
};

static const struct setting *
row(const char *name)
{
	const struct setting *s = settings_find(name);

	if (s == NULL)
		fail_msg("no row %s", name);
	return s;
}

static void
test_every_row_is_well_formed(void **state)
{
	struct wbd_config cfg;
	const struct setting *s, *t, *pair, *first;
	size_t n;

	(void)state;
	assert_true(settings_n > 0);
	for (s = settings_table; s < settings_table + settings_n; s++) {
		for (t = settings_table; t < s; t++)
			if (strcmp(s->group, t->group) == 0 &&
			    strcmp(s->name, t->name) == 0)
				fail_msg("%s.%s: two rows", s->group, s->name);
		assert_ptr_equal(settings_lookup(s->group, s->name), s);
		/* A group's rows are together, at most SETTINGS_MAX. */
		first = settings_group(s->group, &n);
		assert_true(s >= first && s < first + n);
		assert_true(n <= SETTINGS_MAX);
		/* A group with a struct per element (an export, a
		 * listener), a list, or a field the row does not describe
		 * as it is: read by hand, never tuned. */
		if (settings_conf(s->group, &cfg) == NULL || s->size == 0 ||
		    s->type == SETTING_LIST)
			assert_true(s->by_hand);
		if (s->by_hand)
			assert_false(s->runtime || s->late);
		if (s->doc == NULL || s->doc[0] == '\0' || s->unit == NULL)
			fail_msg("%s: no doc line or unit", s->name);
		if (s->min > s->max)
			fail_msg("%s: min above max", s->name);
		switch (s->size == 0 ? SETTING_LIST : s->type) {
		case SETTING_UINT:
		case SETTING_RATIO:
		case SETTING_MODE:
			assert_int_equal(s->size, sizeof(unsigned));
			assert_true(s->max <= UINT_MAX);
			if (s->type == SETTING_RATIO)
				assert_true(s->max <= 100);
			break;
		case SETTING_BYTES:
		case SETTING_POW2:
			assert_true(s->size == sizeof(uint64_t) ||
			    (s->size == sizeof(uint32_t) &&
				s->max <= UINT32_MAX));
			break;
		case SETTING_IO_BYTES:
			assert_int_equal(s->size, sizeof(uint64_t));
			break;
		case SETTING_BOOL:
			assert_int_equal(s->size, sizeof(bool));
			break;
		case SETTING_ENUM:
			assert_int_equal(s->size, sizeof(int));
			assert_non_null(s->names);
			for (n = 0; s->names[n] != NULL; n++)
				assert_true(strlen(s->names[n]) <= s->max);
			assert_true(s->def < n);
			break;
		case SETTING_STRING:
			assert_int_equal(s->size, sizeof(char *));
			assert_true(s->min == 1 && s->max > 0);
			break;
		case SETTING_LIST:
			assert_int_equal(s->size, 0);
			break;
		}
		if (s->type != SETTING_STRING)
			assert_null(s->def_str);
		if (s->type == SETTING_BOOL || s->type == SETTING_STRING ||
		    s->type == SETTING_MODE || s->type == SETTING_ENUM ||
		    s->type == SETTING_LIST)
			assert_string_equal(s->unit, "");
		else if (s->unit[0] == '\0')
			fail_msg("%s: no unit", s->name);
		/* Only the writeback rows are tunables. */
		if (strcmp(s->group, "writeback") != 0) {
			assert_false(s->runtime);
			assert_int_equal(s->scope, SETTING_GLOBAL);
			assert_null(s->pair);
			continue;
		}
		assert_ptr_equal(settings_find(s->name), s);
		assert_true(s->offset + s->size <= sizeof(struct writeback_conf));
		if (s->scope == SETTING_DEVICE) {
			assert_int_equal(s->type, SETTING_RATIO);
			assert_true(s->dev_offset + sizeof(unsigned) <=
			    sizeof(struct device_conf));
		}
		if (s->pair != NULL) {
			/* A threshold: a ratio and a size, each the other's. */
			pair = row(s->pair);
			assert_string_equal(pair->pair, s->name);
			assert_true((s->type == SETTING_RATIO) !=
			    (pair->type == SETTING_RATIO));
			assert_true(s->runtime == pair->runtime);
		}
	}
}

/* The defaults are the table's, within its ranges. */
static void
test_defaults_are_valid(void **state)
{
	struct wbd_config cfg;
	const struct setting *s;
	struct settings_err e;
	const void *conf;
	char *const *str;
	uint64_t v;

	(void)state;
	config_defaults(&cfg);
	for (s = settings_table; s < settings_table + settings_n; s++) {
		conf = settings_conf(s->group, &cfg);
		if (conf == NULL || s->size == 0)
			continue; /* per element, or a list: by hand */
		if (s->type == SETTING_STRING) {
			str = (char *const *)((const char *)conf + s->offset);
			if (s->def_str == NULL)
				assert_null(*str);
			else
				assert_string_equal(*str, s->def_str);
			continue;
		}
		v = settings_load(s, conf);
		assert_true(v == s->def);
		if (s->pair != NULL && !settings_in_use(s, &cfg.writeback))
			continue;
		if (s->type != SETTING_BOOL && s->type != SETTING_MODE &&
		    s->type != SETTING_ENUM && !settings_valid(s, v, PAGE))
			fail_msg("%s.%s: default %llu out of range", s->group,
			    s->name, (unsigned long long)v);
	}
	assert_int_equal(settings_check(&cfg.writeback, NULL, 0, &file_env, 0,
	    &e), 0);
	config_free(&cfg);
}

/* A ratio rounds down to pages, a size up. */
static void
test_threshold_pages_rounding(void **state)
{
	struct threshold t;

	(void)state;
	t = (struct threshold){ .ratio_pct = 20 };
	assert_int_equal(settings_threshold_pages(&t, CACHE_PAGES, PAGE), 13107);
	t = (struct threshold){ .ratio_pct = 10 };
	assert_int_equal(settings_threshold_pages(&t, 99, PAGE), 9);
	t = (struct threshold){ .ratio_pct = 100 };
	assert_int_equal(settings_threshold_pages(&t, 99, PAGE), 99);
	t = (struct threshold){ .ratio_pct = 0 };
	assert_int_equal(settings_threshold_pages(&t, 99, PAGE), 0);
	t = (struct threshold){ .bytes = PAGE };
	assert_int_equal(settings_threshold_pages(&t, CACHE_PAGES, PAGE), 1);
	t = (struct threshold){ .bytes = PAGE + 1 };
	assert_int_equal(settings_threshold_pages(&t, CACHE_PAGES, PAGE), 2);
	t = (struct threshold){ .bytes = 1 };
	assert_int_equal(settings_threshold_pages(&t, CACHE_PAGES, PAGE), 1);
	/* Bytes win over a ratio left behind. */
	t = (struct threshold){ .ratio_pct = 50, .bytes = 3 * PAGE };
	assert_int_equal(settings_threshold_pages(&t, CACHE_PAGES, PAGE), 3);
}

/* Setting one form of a threshold clears the other; only one is in use. */
static void
test_threshold_forms(void **state)
{
	struct wbd_config cfg;
	struct writeback_conf *wc = &cfg.writeback;

	(void)state;
	config_defaults(&cfg);
	assert_true(settings_in_use(row("dirty_ratio"), wc));
	assert_false(settings_in_use(row("dirty_bytes"), wc));
	settings_set(row("dirty_bytes"), wc, 64 << 20);
	assert_true(wc->dirty.bytes == 64 << 20);
	assert_int_equal(wc->dirty.ratio_pct, 0);
	assert_false(settings_in_use(row("dirty_ratio"), wc));
	assert_true(settings_in_use(row("dirty_bytes"), wc));
	settings_set(row("dirty_ratio"), wc, 30);
	assert_true(wc->dirty.bytes == 0);
	assert_int_equal(settings_get(row("dirty_ratio"), wc), 30);
	config_free(&cfg);
}

static void
expect_refused(const struct writeback_conf *wc, const struct device_conf *devs,
    size_t n_devs, uint64_t given, const char *blamed, ssize_t dev,
    const char *what)
{
	struct settings_err e;

	if (settings_check(wc, devs, n_devs, &file_env, given, &e) != -1)
		fail_msg("passed, expected \"%s\"", what);
	if (blamed != NULL)
		assert_string_equal(e.row->name, blamed);
	assert_int_equal(e.dev, dev);
	if (strstr(e.msg, what) == NULL)
		fail_msg("\"%s\" does not say \"%s\"", e.msg, what);
}

static void
test_rules_between_keys(void **state)
{
	struct wbd_config cfg;
	struct writeback_conf *wc = &cfg.writeback, base;
	struct device_conf devs[2] = {
		{ .device = "8:0", .min_ratio = 0, .max_ratio = 100 },
		{ .device = "8:16", .min_ratio = 0, .max_ratio = 100 },
	};
	struct settings_err e;

	(void)state;
	config_defaults(&cfg);
	base = *wc;

	/* Both forms of one threshold. */
	expect_refused(wc, NULL, 0, settings_bit(row("dirty_ratio")) |
	    settings_bit(row("dirty_bytes")), "dirty_bytes", -1,
	    "expected either dirty_ratio or dirty_bytes, not both");

	/* Ratios compare as ratios, whatever the cache size. */
	wc->dirty_background.ratio_pct = 20;
	expect_refused(wc, NULL, 0, settings_bit(row("dirty_background_ratio")),
	    "dirty_background_ratio", -1,
	    "expected less than writeback.dirty_ratio (20, the default), got 20");
	expect_refused(wc, NULL, 0, settings_bit(row("dirty_ratio")),
	    "dirty_ratio", -1, "expected more than "
	    "writeback.dirty_background_ratio (20, the default), got 20");
	*wc = base;
	wc->dirty_background.ratio_pct = 10;
	wc->dirty.ratio_pct = 11;
	struct settings_env tiny = file_env;
	tiny.total_pages = 4;           /* both are 0 pages: still fine */
	assert_int_equal(settings_check(wc, NULL, 0, &tiny, 0, &e), 0);

	/* Otherwise as pages: a size a byte into the limit's last page. */
	*wc = base;
	settings_set(row("dirty_background_bytes"), wc, 13106ull * PAGE + 1);
	expect_refused(wc, NULL, 0, settings_bit(row("dirty_background_bytes")),
	    "dirty_background_bytes", -1, "both are 13107 pages");
	settings_set(row("dirty_background_bytes"), wc, 13106ull * PAGE);
	assert_int_equal(settings_check(wc, NULL, 0, &file_env,
	    settings_bit(row("dirty_background_bytes")), &e), 0);

	/* min_workers <= max_workers: the key given is blamed. */
	*wc = base;
	wc->min_workers = 8;
	wc->max_workers = 4;
	expect_refused(wc, NULL, 0, settings_bit(row("min_workers")) |
	    settings_bit(row("max_workers")), "max_workers", -1,
	    "expected at least writeback.min_workers (8), got 4");
	wc->min_workers = 16;
	wc->max_workers = 8;
	expect_refused(wc, NULL, 0, settings_bit(row("min_workers")),
	    "min_workers", -1,
	    "expected at most writeback.max_workers (8, the default), got 16");

	/* min_ratio <= max_ratio, globally and per device. */
	*wc = base;
	wc->min_ratio = 60;
	wc->max_ratio = 50;
	expect_refused(wc, NULL, 0, settings_bit(row("min_ratio")), "min_ratio",
	    -1, "expected at most writeback.max_ratio (50, the default)");
	*wc = base;
	devs[1].min_ratio = 60;
	devs[1].max_ratio = 50;
	expect_refused(wc, devs, 2, 0, NULL, 1, "min_ratio (60) above max_ratio "
	    "(50)");
	devs[1].max_ratio = 100;
	devs[0].min_ratio = 50;
	expect_refused(wc, devs, 2, 0, NULL, 1, "add up to more than 100 (110)");
	devs[0].min_ratio = 40;
	assert_int_equal(settings_check(wc, devs, 2, &file_env, 0, &e), 0);
	config_free(&cfg);
}

/* A daemon with a cache of CACHE_PAGES, no devices and no exports: what
 * tune_set needs. */
static void
tune_daemon_new(struct daemon *d)
{
	memset(d, 0, sizeof *d);
	config_defaults(&d->cfg);
	pthread_mutex_init(&d->tune_lock, NULL);
	d->wb.page_size = PAGE;
	d->wb.total_pages = CACHE_PAGES;
	wb_ctl_update(&d->wb, &d->cfg.writeback);
}

static void
tune_daemon_free(struct daemon *d)
{
	config_free(&d->cfg);
	pthread_mutex_destroy(&d->tune_lock);
}

/*
 * dirty_background_bytes around the default dirty limit (20 % of 256M,
 * 13107 pages, 53686272 bytes): the file and wbctl tune accept the same
 * values, and exactly those the writeback thresholds take as they are
 * (no clamping of the background threshold below the limit).  Before the
 * one formula, the file compared 256M / 100 * 20 = 53687080 bytes and
 * tune 256M * 20 / 100 = 53687091, so both accepted values writeback then
 * clamped.
 */
static void
test_file_tune_and_writeback_agree_at_the_edge(void **state)
{
	static const uint64_t values[] = {
		13106ull * PAGE - 1, 13106ull * PAGE, 13106ull * PAGE + 1,
		13107ull * PAGE - 1, 13107ull * PAGE, 13107ull * PAGE + 1,
		53687080, 53687091, 53687092,
	};
	char dir[] = "/tmp/test-settings.XXXXXX", path[128], text[256];
	char err[1024], terr[512];
	struct wbd_config cfg;
	struct daemon d;
	FILE *fp;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/edge.conf", dir);
	for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
		uint64_t v = values[i];
		json_t *set, *changed;
		bool file_ok, tune_ok, wb_ok;

		snprintf(text, sizeof text, "writeback = { "
		    "dirty_background_bytes = %lluL; };\n"
		    "exports = ( { name = \"d\"; backing = \"/tmp/d.img\"; } );\n",
		    (unsigned long long)v);
		assert_non_null(fp = fopen(path, "w"));
		fputs(text, fp);
		assert_int_equal(fclose(fp), 0);
		file_ok = config_load(path, &cfg, err, sizeof err) == 0;
		config_free(&cfg);

		tune_daemon_new(&d);
		set = json_pack("{s:I}", "dirty_background_bytes",
		    (json_int_t)v);
		changed = json_array();
		tune_ok = tune_set(&d, set, changed, terr, sizeof terr) == 0;
		json_decref(set);
		json_decref(changed);
		tune_daemon_free(&d);

		tune_daemon_new(&d);
		d.cfg.writeback.dirty_background = (struct threshold){
			.bytes = v };
		wb_ctl_update(&d.wb, &d.cfg.writeback);
		wb_ok = settings_threshold_pages(&d.cfg.writeback.dirty_background,
		    CACHE_PAGES, PAGE) == d.wb.bg_pages;
		tune_daemon_free(&d);

		if (file_ok != tune_ok || file_ok != wb_ok)
			fail_msg("%llu bytes: file %s, tune %s, writeback %s "
			    "(%s / %s)", (unsigned long long)v,
			    file_ok ? "accepts" : "refuses",
			    tune_ok ? "accepts" : "refuses",
			    wb_ok ? "takes it" : "clamps it",
			    file_ok ? "" : err, tune_ok ? "" : terr);
		if (!tune_ok && strstr(terr, "dirty_background_bytes: "
		    "expected less than dirty_ratio") == NULL)
			fail_msg("tune said \"%s\"", terr);
	}
	unlink(path);
	rmdir(dir);
}

/* tune applies what it accepts, and names the key it refuses. */
static void
test_tune_sets_and_refuses(void **state)
{
	struct daemon d;
	char err[512];
	json_t *set, *changed;

	(void)state;
	tune_daemon_new(&d);
	set = json_pack("{s:s, s:i}", "dirty_bytes", "64M", "max_workers", 4);
	changed = json_array();
	assert_int_equal(tune_set(&d, set, changed, err, sizeof err), 0);
	assert_true(d.cfg.writeback.dirty.bytes == 64 << 20);
	assert_int_equal(d.cfg.writeback.dirty.ratio_pct, 0);
	assert_int_equal(d.cfg.writeback.max_workers, 4);
	assert_true(d.wb.limit_pages == (64u << 20) / PAGE);
	/* dirty_bytes, max_workers and the cleared dirty_ratio */
	assert_int_equal(json_array_size(changed), 3);
	json_decref(set);
	json_decref(changed);

	set = json_pack("{s:i}", "min_workers", 8);
	changed = json_array();
	assert_int_equal(tune_set(&d, set, changed, err, sizeof err), -1);
	assert_non_null(strstr(err, "min_workers: expected at most "
	    "max_workers (4, the current value), got 8"));
	json_decref(set);
	set = json_pack("{s:i}", "max_io_bytes", 65536);
	assert_int_equal(tune_set(&d, set, changed, err, sizeof err), -1);
	assert_non_null(strstr(err, "unknown key"));
	json_decref(set);
	set = json_pack("{s:i, s:s}", "dirty_ratio", 10, "dirty_bytes", "1M");
	assert_int_equal(tune_set(&d, set, changed, err, sizeof err), -1);
	assert_non_null(strstr(err, "not both"));
	json_decref(set);
	json_decref(changed);
	assert_int_equal(d.cfg.writeback.max_workers, 4);
	assert_int_equal(d.cfg.writeback.min_workers, 1);
	tune_daemon_free(&d);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_row_is_well_formed),
		cmocka_unit_test(test_defaults_are_valid),
		cmocka_unit_test(test_threshold_pages_rounding),
		cmocka_unit_test(test_threshold_forms),
		cmocka_unit_test(test_rules_between_keys),
		cmocka_unit_test(test_file_tune_and_writeback_agree_at_the_edge),
		cmocka_unit_test(test_tune_sets_and_refuses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
