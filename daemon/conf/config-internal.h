/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * config-internal.h - what the files of the loader (config.c,
 * config-walk.c, config-listen.c, config-export.c) call of each other:
 * each group's reader, called in order by config.c's cfg_read, and the
 * helpers of keys more than one group has.  Private to conf/; each runs on
 * the thread that loads the file, with no state and no lock.
 */
#ifndef WBD_CONFIG_INTERNAL_H
#define WBD_CONFIG_INTERNAL_H

#include <assert.h>
#include <libconfig.h>
#include <stddef.h>
#include <stdint.h>

#include "cfgread.h"
#include "config.h"
#include "settings.h"

/* The settings table's row of KEY in GROUP ("" the top level), whose
 * bounds a key read by hand is read within. */
static inline const struct setting *
cfg_row_of(const char *group, const char *key)
{
	const struct setting *s = settings_lookup(group, key);

	assert(s != NULL);
	return s;
}

/* Its largest value, or a string's length, as the getters take it. */
#define CFG_MAX(group, key) ((unsigned)cfg_row_of(group, key)->max)

/* config.c: where S is written, as an index of the files libconfig read
 * (cfg->files) and its line; { 0, 0 } for NULL. */
struct config_where
cfg_at(const struct cfg_load *ld, const config_setting_t *s);

/* config-listen.c: the listen group; a TCP listener's "host:port"
 * checked; KEY of G an octal file mode such as "0660" (1 and *OUT, 0 if
 * absent, -1), or a group of this machine (its name and gid); a list of
 * strings, or of listeners (where each is written, its idle_timeout_s),
 * freed. */
int cfg_listen(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg);
int cfg_check_tcp(struct cfg_load *ld, const config_setting_t *s);
int cfg_mode(struct cfg_load *ld, const config_setting_t *g, const char *key,
    unsigned *out);
int cfg_group_name(struct cfg_load *ld, const config_setting_t *g,
    const char *key, char **name, uint32_t *gid);
void cfg_free_strings(char ***v, size_t *n);
void cfg_free_listeners(char ***v, struct config_where **at, int **idle_s,
    size_t *n);

/* config-walk.c: the groups of the settings table.  A group read by its
 * rows alone (remote, memory, metrics), and those with checks between
 * their keys. */
int cfg_rows(struct cfg_load *ld, const config_setting_t *root,
    const char *name, struct wbd_config *cfg);
int cfg_cache(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg);
int cfg_writeback(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg);
int cfg_control(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg);
int cfg_limits(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg);
int cfg_tls(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg);

/* config-export.c: the top level's journal group (before the exports,
 * whose logs it gives defaults), the exports list, then default_export
 * (after it). */
int cfg_journal(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg);
int cfg_exports(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg);
int cfg_default_export(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg);

#endif
