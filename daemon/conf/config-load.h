/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * config-load.h - loading wbd.conf into a struct wbd_config (config.c),
 * and the questions the daemon asks of a loaded one.
 *
 * The structs themselves are base/config.h's: a component that only reads
 * its group includes that, not this.  config_load() fills a struct
 * wbd_config from a file; every error names the file, the line and what
 * was expected.  It runs on the main thread, or on the thread that
 * reloads, and keeps no state between calls.
 */
#ifndef WBD_CONFIG_LOAD_H
#define WBD_CONFIG_LOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "ctl-proto.h"
#include "journal.h"

#define WBD_DEFAULT_CONFIG "/etc/wbd/wbd.conf"
#define WBD_DEFAULT_TCP "127.0.0.1:10809"

const char *cache_mode_name(enum cache_mode m);
int cache_mode_parse(const char *s, enum cache_mode *out);

/*
 * The file name of export NAME's log in journal.dir, in BUF (LEN bytes;
 * CONFIG_JOURNAL_FILE_MAX + 1 are enough): NAME with each byte other than
 * a letter, a digit, '-', '_' or a '.' not first written as "%XX" (upper
 * case), then ".wal".  A name longer than CONFIG_JOURNAL_NAME_CUT bytes
 * once written is cut there (never inside a "%XX"), and '~' and 16 hex
 * digits of a hash (FNV-1a, 64 bits) of the whole name follow.  So two
 * names give two files, but for two long names whose hashes agree: the
 * loader refuses two exports with one log.
 */
#define CONFIG_JOURNAL_NAME_CUT JOURNAL_FILE_NAME_CUT
#define CONFIG_JOURNAL_FILE_MAX (JOURNAL_FILE_NAME_MAX + 4)
void config_journal_file(const char *name, char *buf, size_t len);

/*
 * Load PATH into *CFG (which is zeroed first).  On error returns -1 and
 * writes "PATH:LINE: what was expected" into ERR (up to ERRLEN bytes;
 * "PATH: ..." when no line can be blamed, as for a missing file or a file
 * with no exports at all);
 * *CFG is then left empty.  A good file may carry warnings
 * (cfg->warnings), for the caller to show.
 */
int
config_load(const char *path, struct wbd_config *cfg, char *err, size_t errlen);

/*
 * Defaults only, no exports: what a missing group means.  It allocates the
 * default listener, so config_free() must follow.
 */
void config_defaults(struct wbd_config *cfg);

void config_free(struct wbd_config *cfg);

/*
 * "FILE:LINE" of AT (which may be NULL), FILE one of cfg->files; or cfg->path
 * alone when AT is not written.  Into BUF; returns BUF.
 */
const char *config_where_str(const struct wbd_config *cfg,
    const struct config_where *at, char *buf, size_t len);

/* Log each of CFG's warnings, after PREFIX (such as "reload: "). */
void config_log_warnings(const struct wbd_config *cfg, const char *prefix);

/* The min/max ratio for device NAME ("MAJ:MIN"): an override or the default. */
void config_device_ratios(const struct wbd_config *cfg, const char *name,
    unsigned *min_ratio, unsigned *max_ratio);

/* Listener I of a TCP or Unix list of CFG (cfg->listen_tcp_idle_s or
 * listen_unix_idle_s as IDLE_S): its own idle_timeout_s (0: never), or -1
 * where not given (the limits' then apply, by client). */
static inline int
config_listen_idle_s(const int *idle_s, size_t i)
{
	return idle_s != NULL ? idle_s[i] : -1;
}

/* Export EC lets in anyone who reaches a listener: it has no allow list. */
bool config_export_open_to_all(const struct export_conf *ec);
/*
 * The TCP listeners of CFG open to whoever reaches them: with TLS off
 * (TLS_ON false), bound to an address other than loopback, while some
 * export is open to all.  Sets OUT[0..MAX) to those listeners (strings of
 * cfg->listen_tcp) and returns how many there are.  A host name other than
 * "localhost" is resolved.
 */
size_t config_exposed_listeners(const struct wbd_config *cfg, bool tls_on,
    const char **out, size_t max);

/*
 * Split a TCP listener, "host:port" or "[v6addr]:port" (port 1 to 65535,
 * numeric), into *HOST (without brackets) and *PORT, both to be freed by
 * the caller.  Returns 0, or -1 with errno EINVAL or ENOMEM.
 */
int config_parse_hostport(const char *s, char **host, char **port);

#endif
