/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * settings.h - every key of wbd.conf's groups as one table.
 *
 * A row is one key of a group (cache, writeback, control, remote, limits,
 * tls, memory, metrics): its name, type, unit, range, default, where it lives
 * (the field in its group's struct of config.h, and struct device_conf for
 * a per-device writeback key), whether it changes at run time (wbctl tune
 * and reload) and its doc line.  The config loader walks the rows of a
 * group; wbctl tune, wbctl status and the docs tests read the same rows,
 * so a new key is one row plus its use.
 *
 * The keys the walk does not read are rows too, marked by_hand: the top
 * level (group ""), listen, a listener of listen.tcp or listen.unix, the
 * exports' logs' directory and defaults (journal), an export (exports)
 * and its write log (exports.journal), and writeback.io_engine.  Their group's own code in conf/ reads them (a
 * list, a key per element, an order the walk cannot keep) within the
 * row's bounds; the docs tests hold wbd.conf(5) to them as to the rest.  The rules between the writeback
 * keys (settings_check) and the one formula from a threshold to pages
 * (settings_threshold_pages) are here too; making a set live is
 * settings-apply.c's.
 *
 * The table and the rules are constant and lock-free.
 */
#ifndef WBD_SETTINGS_H
#define WBD_SETTINGS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pool_params;
struct wbd_config; /* config.h */

/* A threshold given either as a ratio (percent) or in bytes; bytes win. */
struct threshold {
	unsigned ratio_pct;
	uint64_t bytes;                 /* 0: use ratio_pct */
};

/* Per writeback device settings, as the kernel's bdi min_ratio/max_ratio. */
struct device_conf {
	char *device;                   /* "MAJ:MIN" */
	unsigned min_ratio;             /* % of the dirty limit guaranteed */
	unsigned max_ratio;             /* % of the dirty limit at most */
	int line;
};

struct writeback_conf {
	struct threshold dirty_background;   /* default 10 % */
	struct threshold dirty;              /* default 20 % */
	unsigned dirty_expire_centisecs;     /* default 3000 */
	unsigned dirty_writeback_centisecs;  /* default 500; 0 disables */
	unsigned min_workers;                /* default 1 */
	unsigned max_workers;                /* default 8 */
	uint64_t max_io_bytes;               /* coalescing cap, default 1M */
	unsigned worker_spawn_ms;            /* work waited this long: grow */
	unsigned worker_idle_ms;             /* idle this long: reap */
	unsigned background_nice;            /* background work's, default 10 */
	unsigned min_ratio;                  /* per-device default, 0 */
	unsigned max_ratio;                  /* per-device default, 100 */
	struct device_conf *devices;         /* per-device overrides */
	size_t n_devices;
	int io_engine; /* enum backend_io_engine */
};

enum setting_type {
	SETTING_UINT,           /* unsigned, min..max */
	SETTING_RATIO,          /* unsigned percent, min..max */
	SETTING_BYTES,          /* a size such as "64M", min..max (0: off
	                           when min is 0), in a uint64_t or uint32_t */
	SETTING_IO_BYTES,       /* uint64_t, a power of two from
	                           cache.page_size to max */
	SETTING_POW2,           /* uint32_t, a size that is a power of two,
	                           min..max */
	SETTING_BOOL,           /* true or false */
	SETTING_STRING,         /* char *, 1 to max bytes, copied */
	SETTING_MODE,           /* unsigned, an octal file mode such as
	                           "0660" */
	SETTING_ENUM,           /* an enum: the index of one of names[], a
	                           string of max bytes at most */
	SETTING_LIST,           /* a list (of strings, or of groups): read
	                           by hand, no field of its own */
};

enum setting_scope {
	SETTING_GLOBAL,         /* GROUP.KEY; for writeback, wbctl tune KEY */
	SETTING_DEVICE,         /* writeback.KEY is every device's default,
	                           writeback.devices[].KEY one device's;
	                           wbctl tune device.MAJ:MIN.KEY */
};

struct setting {
	const char *group; /* "writeback", "limits", ... */
	const char *name;
	enum setting_type type;
	enum setting_scope scope;
	const char *unit;               /* as wbctl tune prints it; "" for
	                                   a bool, a string or a mode */
	uint64_t min, max;              /* a string's: its length */
	uint64_t def;                   /* the default, if not a string */
	const char *def_str;            /* a string's default, or NULL */
	const char *const *names;       /* an enum's, NULL-terminated */
	size_t offset, size;            /* the field in the group's struct */
	size_t dev_offset;              /* in struct device_conf, if per device */
	const char *pair;               /* a threshold's other form: setting
	                                   one clears the other; or NULL */
	bool runtime;                   /* wbctl tune and reload change it
	                                   (writeback rows only) */
	bool late;                      /* read after the group's other rows:
	                                   its checks need them, or the loader
	                                   always has (a file with two mistakes
	                                   is told of the same one first) */
	bool by_hand;                   /* read by its group's own code, not
	                                   the walk (see above) */
	bool unset;                     /* no default: left out, it means
	                                   what its doc line says */
	const char *doc;
};

/* At most this many rows in a group: a "given" mask has a bit for each. */
#define SETTINGS_MAX            64

/* Every group's rows, a group's rows together, in the order of the file's
 * "expected one of" list (and of wbctl tune's). */
extern const struct setting settings_table[];
extern const size_t settings_n;

/* The writeback row named NAME (a tunable), or NULL. */
const struct setting *settings_find(const char *name);
/* The row NAME of GROUP, or NULL. */
const struct setting *settings_lookup(const char *group, const char *name);
/* The first row of GROUP and, in *N, how many it has; NULL if none. */
const struct setting *settings_group(const char *group, size_t *n);
/* GROUP's struct in CFG (&cfg->limits for "limits"; CFG itself for the
 * top level, "", and for "listen"), or NULL for a group with one struct
 * per element (exports, exports.journal, listen.tcp, listen.unix) and for
 * journal, whose defaults its reader sets (conf/config-export.c). */
void *settings_conf(const char *group, struct wbd_config *cfg);
/* A row's bit in its group's "given" mask (see settings_check). */
uint64_t settings_bit(const struct setting *s);

/* A number, bool or mode row's value in CONF, its group's struct; storing
 * it clears its pair's. */
uint64_t settings_load(const struct setting *s, const void *conf);
void settings_store(const struct setting *s, void *conf, uint64_t v);
/* The same for a writeback row in WC, or a per-device row in DC. */
uint64_t settings_get(const struct setting *s, const struct writeback_conf *wc);
void settings_set(const struct setting *s, struct writeback_conf *wc,
    uint64_t v);
uint64_t settings_get_dev(const struct setting *s, const struct device_conf *dc);
void settings_set_dev(const struct setting *s, struct device_conf *dc,
    uint64_t v);
/* Of a threshold's two forms, only one is in use (the bytes form if not 0);
 * every other row always is. */
bool settings_in_use(const struct setting *s, const struct writeback_conf *wc);
/* The value as JSON: an integer, or null for a form not in use. */
json_t *settings_json(const struct setting *s, const struct writeback_conf *wc);

/* Every row's default into CFG (its strings copied: config_free frees
 * them), but a per-element group's and a list's; -1 with errno ENOMEM if a
 * copy cannot be had. */
int settings_defaults(struct wbd_config *cfg);

/* V is in S's range, for a cache of PAGE_SIZE pages (the key alone). */
bool settings_valid(const struct setting *s, uint64_t v, uint32_t page_size);

/*
 * A threshold in cache pages, for a cache of TOTAL_PAGES pages of
 * PAGE_SIZE: a ratio rounds down (the kernel's rule), bytes round up to
 * whole pages.  The config loader, wbctl tune and the writeback thresholds
 * all use this, so they agree at the edge.
 */
uint64_t settings_threshold_pages(const struct threshold *t,
    uint64_t total_pages, uint32_t page_size);

/* What settings_check knows of its caller. */
struct settings_env {
	uint64_t total_pages;           /* the cache */
	uint32_t page_size;
	const char *prefix;             /* before a key named in a message:
	                                   "writeback." in the file */
	const char *kept;               /* a key not given holds: "the default",
	                                   "the current value" */
};

/* The first rule broken, and whom to blame. */
struct settings_err {
	const struct setting *row;      /* the key given wrong, or NULL */
	ssize_t dev;                    /* or this device of DEVS, or -1 */
	char msg[256];                  /* "expected less than ..." */
};

/*
 * The rules between keys, for the file and for wbctl tune alike: a
 * threshold given in only one form; the background threshold below the
 * dirty limit (as percentages when both are ratios, else in pages, as
 * writeback sees them); min_workers <= max_workers; min_ratio <= max_ratio,
 * globally and on each of the N_DEVS devices DEVS, whose min_ratio add up
 * to 100 at most.  GIVEN has the settings_bit of each key just given: a
 * message blames a given key rather than one left as it was.  Returns 0,
 * or -1 with *E filled in.
 */
int settings_check(const struct writeback_conf *wc,
    const struct device_conf *devs, size_t n_devs,
    const struct settings_env *env, uint64_t given, struct settings_err *e);

/* The pool parameters (workers, growth, reaping) WC sets. */
void settings_pool_params(const struct writeback_conf *wc,
    struct pool_params *pp);

#endif
