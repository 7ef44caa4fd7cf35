/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cfgread.h - checked reading of a libconfig file: every error names the
 * file, the line, the key and what was expected ("FILE:LINE: KEY: expected
 * ..., got ..."); an unknown key is an error, with "did you mean" when it
 * looks like a typo; an integer that libconfig would silently truncate is
 * an error too.
 *
 * It knows nothing of wbd's keys: config.c says which keys exist and what
 * they mean.  One struct cfg_load lives on the caller's stack for one read;
 * there is no other state, and no locking (one thread reads one file).
 */
#ifndef WBD_CFGREAD_H
#define WBD_CFGREAD_H

#include <libconfig.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cfg_int_overflow;

struct cfg_load {
	config_t lc;
	const char *path;
	char *dir;                      /* directory of path, for @include */
	char *err;                      /* the caller's buffer, may be NULL */
	size_t errlen;
	struct cfg_int_overflow *ovf;   /* plain integers above 32 bits */
	size_t n_ovf;
	bool lc_ready;                  /* config_init() was called */
	char *warnings;                 /* cfg_warn's lines, each ending
	                                   "\n"; NULL if none */
};

/* Start a read of PATH; errors go to ERR (ERRLEN bytes, may be 0). */
void cfg_begin(struct cfg_load *ld, const char *path, char *err,
    size_t errlen);
/*
 * Parse the file (and its @includes, relative to its directory) and check
 * its integers.  Returns the root group, or NULL with the error reported
 * and errno set (EINVAL for the text, else why the file cannot be read).
 */
config_setting_t *cfg_read_file(struct cfg_load *ld);
/* Free what the read holds (take ld->warnings first to keep them); errno
 * is preserved. */
void cfg_end(struct cfg_load *ld);

/*
 * Report an error about setting S: "FILE:LINE: KEY: message".  For the
 * root or NULL (something missing from the whole file) there is no line:
 * "FILE: message".  Sets errno to EINVAL.
 */
void cfg_error(struct cfg_load *ld, const config_setting_t *s,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void cfg_nomem(struct cfg_load *ld);
/* A warning about S (the file is still good), in the same form, kept as a
 * line of ld->warnings. */
void cfg_warn(struct cfg_load *ld, const config_setting_t *s, const char *fmt,
    ...) __attribute__((format(printf, 3, 4)));
/* What the file said, for "got ..." in messages; returns BUF. */
const char *cfg_repr(const config_setting_t *s, char *buf, size_t len);
/* "writeback.devices[1].max_ratio": the path of S from the root. */
void cfg_key_path(const config_setting_t *s, char *buf, size_t len);

/* Every member of GROUP must be one of KNOWN (NULL-terminated). */
int cfg_check_keys(struct cfg_load *ld, const config_setting_t *group,
    const char *const *known);

/* Returns 1 and sets *OUT if KEY is a group, 0 if absent, -1 on error. */
int cfg_group(struct cfg_load *ld, const config_setting_t *parent,
    const char *key, config_setting_t **out);

/*
 * The scalar getters: each returns 1 and sets *OUT if KEY is present in
 * GROUP (which may be NULL) and valid, 0 if KEY is absent (*OUT is left
 * alone), -1 after an error.
 */
int cfg_uint(struct cfg_load *ld, const config_setting_t *group,
    const char *key, unsigned min, unsigned max, unsigned *out);
/*
 * A size: an integer, or a string such as "512M" (see size_parse).  If PCT
 * is not NULL, "N%" (1 to 100) is accepted too and sets *PCT (else *PCT is
 * set to 0).
 */
int cfg_size(struct cfg_load *ld, const config_setting_t *group,
    const char *key, uint64_t *out, unsigned *pct);
int cfg_bool(struct cfg_load *ld, const config_setting_t *group,
    const char *key, bool *out);
/* A string of 1 to MAX bytes; *OUT points into libconfig's tree. */
int cfg_string(struct cfg_load *ld, const config_setting_t *group,
    const char *key, size_t max, const char **out);

/* strdup, reporting ENOMEM. */
int cfg_strdup(struct cfg_load *ld, const char *s, char **out);

#endif
