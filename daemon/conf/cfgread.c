/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cfgread.c - checked reading of a libconfig file (see cfgread.h): errors
 * with file, line and key, unknown keys with suggestions, typed getters,
 * and the scan for integers libconfig would truncate.
 *
 * Runs on whichever thread reads a configuration (wbd's main thread, or
 * the control thread for a reload); all state is in the caller's struct
 * cfg_load.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libconfig.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfgread.h"
#include "size.h"

/*
 * libconfig 1.5 stores an integer written without the L suffix in an int
 * and silently drops the high bits: "size = 5368709120;" reads as 1G.  The
 * loader finds such literals in the text (cfg_scan_file) and reports them
 * against the key that holds them (cfg_check_ints).
 */
struct cfg_int_overflow {
	char *file;             /* as libconfig names it in settings */
	unsigned line;
	unsigned nth;           /* which plain integer on that line, from 0 */
	char text[32];
};

/* While walking the settings in file order: where the last int was. */
struct int_walk {
	const char *file;
	unsigned line;
	unsigned nth;
};

void
cfg_key_path(const config_setting_t *s, char *buf, size_t len)
{
	const config_setting_t *parent = config_setting_parent(s);
	size_t n;

	buf[0] = '\0';
	if (parent != NULL && !config_setting_is_root(parent))
		cfg_key_path(parent, buf, len);
	n = strlen(buf);
	if (config_setting_name(s) != NULL)
		snprintf(buf + n, len - n, "%s%s", n ? "." : "",
		    config_setting_name(s));
	else
		snprintf(buf + n, len - n, "[%d]", config_setting_index(s));
}

/* "FILE:LINE: KEY: " for setting S, or "FILE: " for the root or NULL,
 * into BUF; its length (as snprintf). */
static int
cfg_where(struct cfg_load *ld, const config_setting_t *s, char *buf, size_t len)
{
	char key[256];
	const char *file;

	if (s == NULL || config_setting_is_root(s))
		return snprintf(buf, len, "%s: ", ld->path);
	file = config_setting_source_file(s);
	if (file == NULL)
		file = ld->path;
	cfg_key_path(s, key, sizeof key);
	return snprintf(buf, len, "%s:%u: %s: ", file,
	    config_setting_source_line(s), key);
}

/*
 * Report an error about setting S: "FILE:LINE: KEY: message".  For the
 * root (something missing from the whole file) there is no line:
 * "FILE: message".  Sets errno to EINVAL.
 */
void
cfg_error(struct cfg_load *ld, const config_setting_t *s, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (ld->err != NULL && ld->errlen > 0) {
		n = cfg_where(ld, s, ld->err, ld->errlen);
		if (n >= 0 && (size_t)n < ld->errlen) {
			va_start(ap, fmt);
			vsnprintf(ld->err + n, ld->errlen - n, fmt, ap);
			va_end(ap);
		}
	}
	errno = EINVAL;
}

void
cfg_warn(struct cfg_load *ld, const config_setting_t *s, const char *fmt, ...)
{
	char line[1024];
	size_t old = ld->warnings ? strlen(ld->warnings) : 0;
	va_list ap;
	int n = cfg_where(ld, s, line, sizeof line);

	if (n < 0 || (size_t)n >= sizeof line)
		return;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof line - n, fmt, ap);
	va_end(ap);
	/* A warning that cannot be kept for want of memory is dropped. */
	char *w = realloc(ld->warnings, old + strlen(line) + 2);
	if (w == NULL)
		return;
	snprintf(w + old, strlen(line) + 2, "%s\n", line);
	ld->warnings = w;
}

void
cfg_nomem(struct cfg_load *ld)
{
	if (ld->err != NULL && ld->errlen > 0)
		snprintf(ld->err, ld->errlen, "%s: out of memory", ld->path);
	errno = ENOMEM;
}

/* What the file said, for "got ..." in messages. */
const char *
cfg_repr(const config_setting_t *s, char *buf, size_t len)
{
	const char *str;
	int n;

	switch (config_setting_type(s)) {
	case CONFIG_TYPE_INT:
		snprintf(buf, len, "%d", config_setting_get_int(s));
		break;
	case CONFIG_TYPE_INT64:
		snprintf(buf, len, "%lld", config_setting_get_int64(s));
		break;
	case CONFIG_TYPE_FLOAT:
		/* Keep "1e3" from reading as the integer 1000. */
		n = snprintf(buf, len, "%g", config_setting_get_float(s));
		if (n > 0 && (size_t)n + 2 < len && strpbrk(buf, ".en") == NULL)
			strcat(buf, ".0");
		break;
	case CONFIG_TYPE_BOOL:
		snprintf(buf, len, "%s",
		    config_setting_get_bool(s) ? "true" : "false");
		break;
	case CONFIG_TYPE_STRING:
		str = config_setting_get_string(s);
		if (strlen(str) > 64)
			snprintf(buf, len, "\"%.64s...\"", str);
		else
			snprintf(buf, len, "\"%s\"", str);
		break;
	case CONFIG_TYPE_GROUP:
		snprintf(buf, len, "a group { ... }");
		break;
	case CONFIG_TYPE_ARRAY:
		snprintf(buf, len, "an array [ ... ]");
		break;
	case CONFIG_TYPE_LIST:
		snprintf(buf, len, "a list ( ... )");
		break;
	default:
		snprintf(buf, len, "nothing");
		break;
	}
	return buf;
}

/* Levenshtein distance, for "did you mean"; long names are never close. */
static unsigned
cfg_distance(const char *a, const char *b)
{
	unsigned row[64], i, j, diag, up, best;
	size_t la = strlen(a), lb = strlen(b);

	if (la >= 64 || lb >= 64)
		return UINT_MAX;
	for (j = 0; j <= lb; j++)
		row[j] = j;
	for (i = 1; i <= la; i++) {
		diag = row[0];
		row[0] = i;
		for (j = 1; j <= lb; j++) {
			up = row[j];
			best = diag + (tolower((unsigned char)a[i - 1]) !=
			    tolower((unsigned char)b[j - 1]));
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[lb];
}

/* Every member of GROUP must be one of KNOWN (NULL-terminated). */
int
cfg_check_keys(struct cfg_load *ld, const config_setting_t *group,
    const char *const *known)
{
	const char *const *k;
	const char *name, *near;
	config_setting_t *s;
	char list[512];
	unsigned d, near_d;
	size_t n;
	int i;

	for (i = 0; i < config_setting_length(group); i++) {
		s = config_setting_get_elem(group, i);
		name = config_setting_name(s);
		near = NULL;
		near_d = UINT_MAX;
		for (k = known; *k != NULL; k++) {
			if (strcmp(name, *k) == 0)
				break;
			d = cfg_distance(name, *k);
			if (d < near_d) {
				near = *k;
				near_d = d;
			}
		}
		if (*k != NULL)
			continue;
		if (near != NULL && (near_d <= 2 ||
		    near_d <= strlen(name) / 3)) {
			cfg_error(ld, s, "unknown key; did you mean %s?", near);
			return -1;
		}
		list[0] = '\0';
		for (k = known, n = 0; *k != NULL && n < sizeof list; k++)
			n += snprintf(list + n, sizeof list - n, "%s%s",
			    k == known ? "" : ", ", *k);
		cfg_error(ld, s, "unknown key; expected one of: %s", list);
		return -1;
	}
	return 0;
}

/* Returns 1 and sets *OUT if KEY is a group, 0 if absent, -1 on error. */
int
cfg_group(struct cfg_load *ld, const config_setting_t *parent,
    const char *key, config_setting_t **out)
{
	config_setting_t *s = config_setting_get_member(parent, key);
	char got[96];

	*out = NULL;
	if (s == NULL)
		return 0;
	if (!config_setting_is_group(s)) {
		cfg_error(ld, s, "expected a group such as %s = { ... };, "
		    "got %s", key, cfg_repr(s, got, sizeof got));
		return -1;
	}
	*out = s;
	return 1;
}

/*
 * The scalar getters: each returns 1 and sets *OUT if KEY is present and
 * valid, 0 if KEY is absent (*OUT is left alone), -1 after an error.
 */
int
cfg_uint(struct cfg_load *ld, const config_setting_t *group, const char *key,
    unsigned min, unsigned max, unsigned *out)
{
	config_setting_t *s;
	long long v;
	char got[96];

	if (group == NULL || (s = config_setting_get_member(group, key)) == NULL)
		return 0;
	if (config_setting_type(s) == CONFIG_TYPE_INT ||
	    config_setting_type(s) == CONFIG_TYPE_INT64) {
		v = config_setting_get_int64(s);
		if (v >= min && v <= max) {
			*out = (unsigned)v;
			return 1;
		}
	}
	cfg_error(ld, s, "expected an integer from %u to %u, got %s", min, max,
	    cfg_repr(s, got, sizeof got));
	return -1;
}

/* "N%", 1 to 100; returns 1 if S is a percentage at all, -1 if invalid. */
static int
cfg_parse_pct(const char *s, unsigned *pct)
{
	const char *end = s + strlen(s);
	unsigned long v;
	char *p;

	while (end > s && isspace((unsigned char)end[-1]))
		end--;
	if (end == s || end[-1] != '%')
		return 0;
	while (isspace((unsigned char)*s))
		s++;
	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoul(s, &p, 10);
	while (isspace((unsigned char)*p))
		p++;
	if (errno != 0 || p != end - 1 || v < 1 || v > 100)
		return -1;
	*pct = (unsigned)v;
	return 1;
}

/*
 * A size: an integer, or a string such as "512M" (see size_parse).  If PCT
 * is not NULL, "N%" is accepted too and sets *PCT (else *PCT is set to 0).
 */
int
cfg_size(struct cfg_load *ld, const config_setting_t *group, const char *key,
    uint64_t *out, unsigned *pct)
{
	config_setting_t *s;
	const char *str;
	long long v;
	char got[96];
	int r;

	if (group == NULL || (s = config_setting_get_member(group, key)) == NULL)
		return 0;
	if (pct != NULL)
		*pct = 0;
	switch (config_setting_type(s)) {
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64:
		v = config_setting_get_int64(s);
		if (v >= 0) {
			*out = (uint64_t)v;
			return 1;
		}
		break;
	case CONFIG_TYPE_STRING:
		str = config_setting_get_string(s);
		if (pct != NULL && (r = cfg_parse_pct(str, pct)) != 0) {
			if (r > 0)
				return 1;
			cfg_error(ld, s, "expected a share of RAM from 1%% to "
			    "100%%, got %s", cfg_repr(s, got, sizeof got));
			return -1;
		}
		if (size_parse(str, out) == 0)
			return 1;
		if (errno == ERANGE) {
			cfg_error(ld, s, "expected a size below 16E, got %s",
			    cfg_repr(s, got, sizeof got));
			return -1;
		}
		break;
	default:
		break;
	}
	cfg_error(ld, s, "expected a size such as \"512M\" or \"10G\"%s, got %s",
	    pct != NULL ? " or a share of RAM such as \"25%\"" : "",
	    cfg_repr(s, got, sizeof got));
	return -1;
}

int
cfg_bool(struct cfg_load *ld, const config_setting_t *group, const char *key,
    bool *out)
{
	config_setting_t *s;
	char got[96];

	if (group == NULL || (s = config_setting_get_member(group, key)) == NULL)
		return 0;
	if (config_setting_type(s) != CONFIG_TYPE_BOOL) {
		cfg_error(ld, s, "expected true or false, got %s",
		    cfg_repr(s, got, sizeof got));
		return -1;
	}
	*out = config_setting_get_bool(s);
	return 1;
}

/* A string of 1 to MAX bytes; *OUT points into libconfig's tree. */
int
cfg_string(struct cfg_load *ld, const config_setting_t *group, const char *key,
    size_t max, const char **out)
{
	config_setting_t *s;
	const char *str;
	char got[96];
	size_t len;

	if (group == NULL || (s = config_setting_get_member(group, key)) == NULL)
		return 0;
	if (config_setting_type(s) != CONFIG_TYPE_STRING) {
		cfg_error(ld, s, "expected a string, got %s",
		    cfg_repr(s, got, sizeof got));
		return -1;
	}
	str = config_setting_get_string(s);
	len = strlen(str);
	if (len == 0 || len > max) {
		cfg_error(ld, s, "expected a string of 1 to %zu bytes, got %zu "
		    "bytes", max, len);
		return -1;
	}
	*out = str;
	return 1;
}

int
cfg_strdup(struct cfg_load *ld, const char *s, char **out)
{
	if ((*out = strdup(s)) == NULL) {
		cfg_nomem(ld);
		return -1;
	}
	return 0;
}

/*
 * Find plain integers that do not fit in an int, scanning FILE the way
 * libconfig's lexer does: comments, strings and names are skipped, floats
 * and L-suffixed integers are not counted.
 */
static int
cfg_scan_text(struct cfg_load *ld, const char *name, const char *buf)
{
	const char *p = buf, *start;
	unsigned line = 1, nth = 0, nth_line = 1;
	unsigned long long v;
	struct cfg_int_overflow *o;
	bool hex, neg;

	while (*p != '\0') {
		if (*p == '\n') {
			line++;
			p++;
		} else if (*p == '#' || (p[0] == '/' && p[1] == '/')) {
			while (*p != '\0' && *p != '\n')
				p++;
		} else if (p[0] == '/' && p[1] == '*') {
			for (p += 2; *p != '\0' && !(p[0] == '*' && p[1] == '/');
			    p++)
				if (*p == '\n')
					line++;
			if (*p != '\0')
				p += 2;
		} else if (*p == '"') {
			for (p++; *p != '\0' && *p != '"'; p++) {
				if (*p == '\\' && p[1] != '\0')
					p++;
				if (*p == '\n')
					line++;
			}
			if (*p != '\0')
				p++;
		} else if (isalpha((unsigned char)*p) || *p == '*') {
			while (isalnum((unsigned char)*p) || *p == '-' ||
			    *p == '_' || *p == '*')
				p++;
		} else if (isdigit((unsigned char)*p) ||
		    (*p == '.' && isdigit((unsigned char)p[1]))) {
			start = p;
			neg = p > buf && p[-1] == '-';
			hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X') &&
			    isxdigit((unsigned char)p[2]);
			if (hex) {
				for (p += 2; isxdigit((unsigned char)*p); p++)
					;
			} else {
				while (isdigit((unsigned char)*p))
					p++;
				if (*p == '.' || *p == 'e' || *p == 'E') {
					/* A float: not an int setting. */
					while (isdigit((unsigned char)*p) ||
					    *p == '.' || *p == 'e' || *p == 'E' ||
					    ((*p == '-' || *p == '+') &&
					    (p[-1] == 'e' || p[-1] == 'E')))
						p++;
					continue;
				}
			}
			if (*p == 'L') {
				/* An int64 setting. */
				while (*p == 'L')
					p++;
				continue;
			}
			if (line != nth_line) {
				nth = 0;
				nth_line = line;
			}
			errno = 0;
			v = strtoull(start, NULL, hex ? 16 : 10);
			if (errno == ERANGE || v > (unsigned long long)INT_MAX +
			    (neg && !hex)) {
				o = realloc(ld->ovf, (ld->n_ovf + 1) * sizeof *o);
				if (o == NULL) {
					cfg_nomem(ld);
					return -1;
				}
				ld->ovf = o;
				o += ld->n_ovf;
				if ((o->file = strdup(name)) == NULL) {
					cfg_nomem(ld);
					return -1;
				}
				ld->n_ovf++;
				o->line = line;
				o->nth = nth;
				snprintf(o->text, sizeof o->text, "%s%.*s",
				    neg ? "-" : "", (int)(p - start), start);
			}
			nth++;
		} else {
			p++;
		}
	}
	return 0;
}

static int
cfg_scan_file(struct cfg_load *ld, const char *name, const char *path)
{
	FILE *f;
	char *buf = NULL;
	size_t len = 0;
	int rc;

	/* If it cannot be read now, libconfig's own checks stand alone. */
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	rc = getdelim(&buf, &len, '\0', f) == -1 ? 0 :
	    cfg_scan_text(ld, name, buf);
	free(buf);
	fclose(f);
	return rc;
}

static int
cfg_scan_ints(struct cfg_load *ld)
{
	unsigned i;
	char *path;
	int rc;

	for (i = 0; i < ld->lc.num_filenames; i++) {
		const char *name = ld->lc.filenames[i];

		/* The first is PATH itself, includes are named as written. */
		if (i == 0) {
			rc = cfg_scan_file(ld, name, ld->path);
		} else {
			if (asprintf(&path, "%s/%s", ld->dir, name) == -1) {
				cfg_nomem(ld);
				return -1;
			}
			rc = cfg_scan_file(ld, name, path);
			free(path);
		}
		if (rc == -1)
			return -1;
	}
	return 0;
}

static int
cfg_check_ints(struct cfg_load *ld, const config_setting_t *s,
    struct int_walk *w)
{
	const char *file;
	unsigned line;
	size_t i;
	int j;

	if (config_setting_is_aggregate(s)) {
		for (j = 0; j < config_setting_length(s); j++)
			if (cfg_check_ints(ld, config_setting_get_elem(s, j),
			    w) == -1)
				return -1;
		return 0;
	}
	if (config_setting_type(s) != CONFIG_TYPE_INT)
		return 0;
	file = config_setting_source_file(s);
	line = config_setting_source_line(s);
	if (file == NULL)
		return 0;
	if (w->file != NULL && strcmp(w->file, file) == 0 && w->line == line) {
		w->nth++;
	} else {
		w->file = file;
		w->line = line;
		w->nth = 0;
	}
	for (i = 0; i < ld->n_ovf; i++) {
		struct cfg_int_overflow *o = &ld->ovf[i];

		if (o->line == line && o->nth == w->nth &&
		    strcmp(o->file, file) == 0) {
			cfg_error(ld, s, "expected an integer that fits in 32 "
			    "bits, got %s; write sizes as strings such as "
			    "\"10G\", or add the L suffix (%sL)", o->text,
			    o->text);
			return -1;
		}
	}
	return 0;
}

/*
 * libconfig says only "file I/O error"; open the file first to say why,
 * and to refuse a directory.
 */
static int
cfg_open_check(struct cfg_load *ld)
{
	struct stat st;
	int fd, saved;

	if ((fd = open(ld->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) == -1)
		goto fail;
	if (fstat(fd, &st) == -1) {
		saved = errno;
		close(fd);
		errno = saved;
		goto fail;
	}
	close(fd);
	if (S_ISDIR(st.st_mode)) {
		errno = EISDIR;
		goto fail;
	}
	return 0;

fail:
	saved = errno;
	if (ld->err != NULL && ld->errlen > 0)
		snprintf(ld->err, ld->errlen, "%s: cannot open: %s", ld->path,
		    strerror(saved));
	errno = saved;
	return -1;
}

/*
 * libconfig 1.5's scanner calls exit() when it cannot read an included
 * file ("input in flex scanner failed": @include "" or "." names a
 * directory, found by fuzzing): wbd would die mid-reload with dirty data
 * cached.  So every @include is followed here first, before libconfig
 * sees the file: each must name a regular file that can be opened.
 * NAME is the file as messages name it; DEPTH bounds a loop of includes.
 */
#define CFG_INCLUDE_DEPTH_MAX 10

static int
cfg_check_includes(struct cfg_load *ld, const char *name, const char *path,
    unsigned depth)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	unsigned lineno = 0;
	int rc = 0;

	if (f == NULL)
		return 0; /* libconfig reports it, without exiting */
	ssize_t n;

	while (rc == 0 && (n = getline(&line, &cap, f)) != -1) {
		const char *p = line, *q;
		char *inc, *full;
		struct stat st;

		lineno++;
		if (strlen(line) != (size_t)n) {
			/* libconfig would cut the name there. */
			if (ld->err != NULL && ld->errlen > 0)
				snprintf(ld->err, ld->errlen,
				    "%s:%u: a NUL byte: expected text", name,
				    lineno);
			rc = -1;
			break;
		}
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncmp(p, "@include", 8) != 0)
			continue;
		p = strchr(p + 8, '"');
		q = p ? strchr(p + 1, '"') : NULL;
		if (!p || !q)
			continue; /* a syntax error libconfig reports */
		if ((inc = strndup(p + 1, (size_t)(q - p - 1))) == NULL ||
		    asprintf(&full, "%s/%s", ld->dir, inc) == -1) {
			free(inc);
			cfg_nomem(ld);
			rc = -1;
			break;
		}
		const char *target = inc[0] == '/' ? inc : full;
		const char *why = NULL;
		if (depth >= CFG_INCLUDE_DEPTH_MAX)
			why = "includes nested too deep";
		else if (inc[0] == '\0' || stat(target, &st) == -1 ||
		    !S_ISREG(st.st_mode) || access(target, R_OK) == -1)
			why = "expected a readable regular file";
		if (why) {
			if (ld->err != NULL && ld->errlen > 0)
				snprintf(ld->err, ld->errlen,
				    "%s:%u: @include \"%s\": %s", name, lineno,
				    inc, why);
			rc = -1;
		} else {
			rc = cfg_check_includes(ld, inc, target, depth + 1);
		}
		free(inc);
		free(full);
	}
	free(line);
	fclose(f);
	if (rc == -1)
		errno = EINVAL;
	return rc;
}

void
cfg_begin(struct cfg_load *ld, const char *path, char *err, size_t errlen)
{
	memset(ld, 0, sizeof *ld);
	ld->path = path;
	ld->err = err;
	ld->errlen = errlen;
	if (err != NULL && errlen > 0)
		err[0] = '\0';
}

config_setting_t *
cfg_read_file(struct cfg_load *ld)
{
	config_setting_t *root;
	struct int_walk w = { NULL, 0, 0 };
	const char *file;
	char *copy;
	int saved;

	if (cfg_open_check(ld) == -1)
		return NULL;
	if ((copy = strdup(ld->path)) == NULL ||
	    (ld->dir = strdup(dirname(copy))) == NULL) {
		free(copy);
		cfg_nomem(ld);
		return NULL;
	}
	free(copy);

	if (cfg_check_includes(ld, ld->path, ld->path, 0) == -1)
		return NULL;
	config_init(&ld->lc);
	ld->lc_ready = true;
	config_set_include_dir(&ld->lc, ld->dir);
	errno = 0;
	if (config_read_file(&ld->lc, ld->path) == CONFIG_FALSE) {
		saved = errno;
		file = config_error_file(&ld->lc);
		if (config_error_type(&ld->lc) != CONFIG_ERR_FILE_IO)
			saved = EINVAL;
		if (ld->err == NULL || ld->errlen == 0)
			;
		else if (config_error_type(&ld->lc) == CONFIG_ERR_FILE_IO)
			snprintf(ld->err, ld->errlen, "%s: cannot read: %s",
			    ld->path, saved ? strerror(saved) :
			    config_error_text(&ld->lc));
		else
			snprintf(ld->err, ld->errlen, "%s:%d: %s",
			    file ? file : ld->path, config_error_line(&ld->lc),
			    config_error_text(&ld->lc));
		errno = saved ? saved : EIO;
		return NULL;
	}
	root = config_root_setting(&ld->lc);
	if (cfg_scan_ints(ld) == -1 || cfg_check_ints(ld, root, &w) == -1)
		return NULL;
	return root;
}

void
cfg_end(struct cfg_load *ld)
{
	int saved = errno;
	size_t i;

	if (ld->lc_ready)
		config_destroy(&ld->lc);
	ld->lc_ready = false;
	for (i = 0; i < ld->n_ovf; i++)
		free(ld->ovf[i].file);
	free(ld->ovf);
	ld->ovf = NULL;
	ld->n_ovf = 0;
	free(ld->dir);
	ld->dir = NULL;
	free(ld->warnings);
	ld->warnings = NULL;
	errno = saved;
}
