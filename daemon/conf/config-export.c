/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * config-export.c - the exports list of wbd.conf: each export's keys, its
 * allow list and its write log (journal = { ... }, or a file of the top
 * level's journal.dir, whose group is read here too), the names and logs
 * distinct between exports, and default_export, checked against them.
 * Called by config.c's cfg_read, on the thread that loads the file; no
 * state, no lock.
 */

#include <errno.h>
#include <libconfig.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "access.h"
#include "backend.h"
#include "cfgread.h"
#include "config-internal.h"
#include "config-load.h"
#include "journal.h"
#include "utf8.h"

/* The largest file offset (off_t): no export can be larger. */
#define EXPORT_MAX_BYTES ((uint64_t)INT64_MAX)

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

/* A journal group's size, mode and ordered (GROUP: "journal" at the top
 * level, "exports.journal" in an export), over what *JC holds. */
static int
cfg_journal_keys(struct cfg_load *ld, const config_setting_t *g,
    const char *group, struct journal_conf *jc)
{
	config_setting_t *s;
	const char *str;
	char got[96];
	int r;

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
	if ((r = cfg_string(ld, g, "mode", CFG_MAX(group, "mode"), &str)) == -1)
		return -1;
	if (r == 1) {
		if (strcmp(str, "on-write") == 0) {
			jc->mode = JOURNAL_ON_WRITE;
		} else if (strcmp(str, "on-flush") == 0) {
			jc->mode = JOURNAL_ON_FLUSH;
		} else {
			s = config_setting_get_member(g, "mode");
			cfg_error(ld, s,
			    "expected \"on-flush\" or \"on-write\", got %s",
			    cfg_repr(s, got, sizeof got));
			return -1;
		}
	}
	return cfg_bool(ld, g, "ordered", &jc->ordered) == -1 ? -1 : 0;
}

/*
 * A journal group's state_dir (GROUP: as for cfg_journal_keys), the
 * directory of its logs' state files, into *DIR (and where, *AT): an
 * absolute path with room for a state file's name.  0 (left alone if
 * unset) or -1.
 */
static int
cfg_state_dir(struct cfg_load *ld, const config_setting_t *g, const char *group,
    char **dir, struct config_where *at)
{
	config_setting_t *s = config_setting_get_member(g, "state_dir");
	const char *str;
	char got[96];
	int r =
	    cfg_string(ld, g, "state_dir", CFG_MAX(group, "state_dir"), &str);

	if (r != 1)
		return r;
	/* Room for "/", the state file's name and ".tmp". */
	if (str[0] != '/' ||
	    strlen(str) + 1 + JOURNAL_FILE_NAME_MAX + 10 >= PATH_MAX) {
		cfg_error(ld, s,
		    "expected state_dir = \"/absolute/path\" shorter than %d "
		    "bytes, the directory of the write logs' state files, "
		    "got %s",
		    PATH_MAX - 1 - JOURNAL_FILE_NAME_MAX - 10,
		    cfg_repr(s, got, sizeof got));
		return -1;
	}
	free(*dir);
	*dir = NULL;
	if (cfg_strdup(ld, str, dir) == -1)
		return -1;
	*at = cfg_at(ld, s);
	return 0;
}

/*
 * Where export EX's log (JC) has its state file: its group G's
 * state_dir (G may be NULL), else the top level's, else, for a block
 * device only (xj_state_path), the top level's journal.dir.
 */
static int
cfg_journal_state_dir(struct cfg_load *ld, const config_setting_t *g,
    const struct journal_conf *top, struct export_journal_conf *jc)
{
	const char *dir = top->state_dir ? top->state_dir : top->dir;

	jc->state_dir_set = top->state_dir != NULL;
	jc->state_dir_at = top->state_dir ? top->state_dir_at : top->dir_at;
	if (dir && cfg_strdup(ld, dir, &jc->state_dir) == -1)
		return -1;
	if (g && config_setting_get_member(g, "state_dir")) {
		jc->state_dir_set = true;
		return cfg_state_dir(ld, g, "exports.journal", &jc->state_dir,
		    &jc->state_dir_at);
	}
	return 0;
}

/*
 * journal = { dir; size; mode; ordered; state_dir; } at the top level: a
 * directory for every export's log, and the defaults of the exports'
 * journal groups.  Whether the directory exists is for wbd -n and the start.
 */
int
cfg_journal(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg)
{
	static const char *const keys[] = { "dir", "size", "mode", "ordered",
		"state_dir", NULL };
	struct journal_conf *jc = &cfg->journal;
	config_setting_t *g = config_setting_get_member(root, "journal");
	const char *str;
	char got[96];
	int r;

	jc->size_bytes = CONFIG_JOURNAL_DEFAULT_BYTES;
	jc->mode = JOURNAL_ON_FLUSH;
	if (!g)
		return 0;
	if (!config_setting_is_group(g)) {
		cfg_error(ld, g,
		    "expected a group such as journal = { dir = "
		    "\"/var/lib/wbd/journal\"; }, got %s",
		    cfg_repr(g, got, sizeof got));
		return -1;
	}
	if (cfg_check_keys(ld, g, keys) == -1 ||
	    (r = cfg_string(ld, g, "dir", CFG_MAX("journal", "dir"), &str)) ==
		-1)
		return -1;
	if (r == 1) {
		config_setting_t *s = config_setting_get_member(g, "dir");
		/* Room for "/" and a log's file name after it. */
		if (str[0] != '/' ||
		    strlen(str) + 1 + CONFIG_JOURNAL_FILE_MAX >= PATH_MAX) {
			cfg_error(ld, s,
			    "expected dir = \"/absolute/path\" shorter than "
			    "%d bytes, the directory of the exports' write "
			    "logs, got %s",
			    PATH_MAX - 1 - CONFIG_JOURNAL_FILE_MAX,
			    cfg_repr(s, got, sizeof got));
			return -1;
		}
		if (cfg_strdup(ld, str, &jc->dir) == -1)
			return -1;
		jc->dir_at = cfg_at(ld, s);
	}
	if (cfg_state_dir(ld, g, "journal", &jc->state_dir,
		&jc->state_dir_at) == -1)
		return -1;
	return cfg_journal_keys(ld, g, "journal", jc);
}

void
config_journal_file(const char *name, char *buf, size_t len)
{
	journal_file_name(name, ".wal", buf, len);
}

/* Export EX's log in journal.dir: the directory, the file named after
 * the export, and the top level's size, mode and ordered. */
static int
cfg_journal_in_dir(struct cfg_load *ld, const struct journal_conf *top,
    struct export_conf *ex)
{
	struct export_journal_conf *jc = &ex->journal;
	char file[CONFIG_JOURNAL_FILE_MAX + 1], path[PATH_MAX];

	config_journal_file(ex->name, file, sizeof file);
	snprintf(path, sizeof path, "%s/%s", top->dir, file);
	if (cfg_strdup(ld, path, &jc->path) == -1 ||
	    cfg_strdup(ld, top->dir, &jc->dir) == -1)
		return -1;
	jc->path_at = top->dir_at;
	jc->size_bytes = top->size_bytes;
	jc->mode = top->mode;
	jc->ordered = top->ordered;
	return 0;
}

/*
 * journal = { path; size; mode; ordered; } in an export: its write log
 * (docs/journal.md), what the top level's journal group leaves out; with
 * no path (or no group at all) a file in journal.dir if there is one;
 * journal = false: none.  Whether the path can be opened is for wbd -n's
 * host checks and the start.
 */
static int
cfg_export_journal(struct cfg_load *ld, const config_setting_t *e,
    const struct journal_conf *top, struct export_conf *ex)
{
	static const char *const keys[] = { "path", "size", "mode", "ordered",
		"state_dir", NULL };
	struct export_journal_conf *jc = &ex->journal;
	config_setting_t *g = config_setting_get_member(e, "journal");
	struct journal_conf keyed = { .size_bytes = top->size_bytes,
		.mode = top->mode,
		.ordered = top->ordered };
	const char *str;
	char got[96];
	int r;

	if (!g) {
		/* A read-only export writes nothing to log. */
		if (!top->dir || ex->readonly)
			return 0;
		return cfg_journal_in_dir(ld, top, ex) == -1 ?
		    -1 :
		    cfg_journal_state_dir(ld, NULL, top, jc);
	}
	if (config_setting_type(g) == CONFIG_TYPE_BOOL &&
	    !config_setting_get_bool(g))
		return 0; /* journal = false: no log, journal.dir or not */
	if (!config_setting_is_group(g)) {
		cfg_error(ld, g,
		    "expected a group such as journal = { path = "
		    "\"/var/lib/wbd/%s.wal\"; }, or false for no log, got %s",
		    ex->name, cfg_repr(g, got, sizeof got));
		return -1;
	}
	if (cfg_check_keys(ld, g, keys) == -1)
		return -1;
	if ((r = cfg_string(ld, g, "path", CFG_MAX("exports.journal", "path"),
		 &str)) == -1)
		return -1;
	if (r == 1 && str[0] == '/') {
		if (cfg_strdup(ld, str, &jc->path) == -1)
			return -1;
		jc->path_at = cfg_at(ld, config_setting_get_member(g, "path"));
	} else if (r == 1 || !top->dir) {
		cfg_error(ld, r ? config_setting_get_member(g, "path") : g,
		    "expected path = \"/absolute/path\", the file or block "
		    "device that holds export \"%s\"'s write log%s",
		    ex->name, r ? "" : " (or journal.dir at the top level)");
		return -1;
	} else if (cfg_journal_in_dir(ld, top, ex) == -1) {
		return -1;
	}
	if (cfg_journal_keys(ld, g, "exports.journal", &keyed) == -1 ||
	    cfg_journal_state_dir(ld, g, top, jc) == -1)
		return -1;
	jc->size_bytes = keyed.size_bytes;
	jc->mode = keyed.mode;
	jc->ordered = keyed.ordered;
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
    const struct journal_conf *top, struct export_conf *ex)
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

	if ((r = cfg_string(ld, e, "name", CFG_MAX("exports", "name"), &str)) ==
	    -1)
		return -1;
	if (r == 0) {
		cfg_error(ld, e,
		    "name is missing; expected name = \"...\", "
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

	if ((r = cfg_string(ld, e, "backing", CFG_MAX("exports", "backing"),
		 &str)) == -1)
		return -1;
	if (r == 0) {
		cfg_error(ld, e,
		    "backing is missing; expected backing = "
		    "\"/path/to/image\", the file or device behind \"%s\"",
		    ex->name);
		return -1;
	}
	if (cfg_strdup(ld, str, &ex->backing) == -1)
		return -1;
	ex->backing_at = cfg_at(ld, config_setting_get_member(e, "backing"));
	ex->size_at = cfg_at(ld, config_setting_get_member(e, "size"));

	if ((r = cfg_string(ld, e, "description",
		 CFG_MAX("exports", "description"), &str)) == -1)
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
	if ((r = cfg_uint(ld, e, "idle_timeout_s",
		 (unsigned)cfg_row_of("exports", "idle_timeout_s")->min,
		 CFG_MAX("exports", "idle_timeout_s"), &ex->idle_timeout_s)) ==
	    -1)
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
		cfg_error(ld, s,
		    "expected \"writeback\", \"writethrough\" or "
		    "\"writethrough-until-flush\", got %s",
		    cfg_repr(s, got, sizeof got));
		return -1;
	}
	if ((r = cfg_string(ld, e, "tls", CFG_MAX("exports", "tls"), &str)) ==
	    -1)
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
	if (cfg_export_journal(ld, e, top, ex) == -1)
		return -1;
	return cfg_allow(ld, e, ex);
}

/*
 * Two logs of journal.dir (EX's, at E, and PREV's) whose file names
 * differ only in case: a case-insensitive file system (vfat, ext4 with
 * casefold) makes them one file, two exports sharing a log.  Only ASCII
 * letters are kept as they are (config_journal_file), so ASCII case is
 * all there is to fold.
 */
static int
cfg_journal_dir_fold(struct cfg_load *ld, const config_setting_t *e,
    const struct export_conf *prev, const struct export_conf *ex)
{
	const char *pp = prev->journal.path, *pe = ex->journal.path;
	config_setting_t *g = config_setting_get_member(e, "journal");

	if (!prev->journal.dir || !ex->journal.dir || !pp || !pe ||
	    strcasecmp(pp, pe) != 0)
		return 0;
	cfg_error(ld, g ? g : e,
	    "expected export names whose logs in journal.dir differ in more "
	    "than case, got \"%s\" (%s) and \"%s\" (line %d, %s): a "
	    "case-insensitive file system (vfat, ext4 with casefold) makes "
	    "them one file; rename one, or give it a journal.path of its own",
	    ex->name, pe, prev->name, prev->line, pp);
	return -1;
}

int
cfg_exports(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg)
{
	config_setting_t *list, *e;
	char got[96];
	size_t i, j;
	int n;

	if ((list = config_setting_get_member(root, "exports")) == NULL) {
		cfg_error(ld, root,
		    "exports: missing; at least one export "
		    "expected, such as exports = ( { name = \"disk0\"; "
		    "backing = \"/var/lib/wbd/disk0.img\"; } );");
		return -1;
	}
	if (!config_setting_is_list(list)) {
		cfg_error(ld, list,
		    "expected a list of exports such as "
		    "( { name = \"disk0\"; backing = \"/path\"; } ), got %s",
		    cfg_repr(list, got, sizeof got));
		return -1;
	}
	if ((n = config_setting_length(list)) == 0) {
		cfg_error(ld, list,
		    "at least one export expected, such as "
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
			cfg_error(ld, e,
			    "expected an export such as { name = "
			    "\"disk0\"; backing = \"/path\"; }, got %s",
			    cfg_repr(e, got, sizeof got));
			return -1;
		}
		/* Counted first, so config_free() sees what is half done. */
		cfg->n_exports++;
		if (cfg_export(ld, e, &cfg->journal, &cfg->exports[i]) == -1)
			return -1;
		for (j = 0; j < i; j++) {
			if (strcmp(cfg->exports[j].name,
				cfg->exports[i].name) == 0) {
				cfg_error(ld,
				    config_setting_get_member(e, "name"),
				    "expected a name not used "
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
				/* Its path, else its group, else the
				 * export (a log in journal.dir). */
				config_setting_t *g =
				    config_setting_get_member(e, "journal");
				config_setting_t *at = g ? g : e;
				if (g && config_setting_get_member(g, "path"))
					at = config_setting_get_member(g,
					    "path");
				cfg_error(ld, at,
				    "expected a journal path no other "
				    "export uses, got \"%s\" again (export "
				    "\"%s\", line %d)",
				    pi, cfg->exports[j].name,
				    cfg->exports[j].line);
				return -1;
			}
			if (cfg_journal_dir_fold(ld, e, &cfg->exports[j],
				&cfg->exports[i]) == -1)
				return -1;
		}
	}
	return 0;
}

/* default_export = "NAME" or "none"; after the exports. */
int
cfg_default_export(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg)
{
	const char *str;
	int r = cfg_string(ld, root, "default_export",
	    CFG_MAX("", "default_export"), &str);

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
