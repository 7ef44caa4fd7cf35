/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * config-listen.c - the listen group of wbd.conf: its TCP and Unix
 * listeners, each written once and checked as the listener will bind it,
 * their file mode and group; and the helpers of its keys the other groups
 * share (an octal mode, a group of this machine).  Called by config.c's
 * cfg_read, on the thread that loads the file; no state, no lock.
 */

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <libconfig.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "access.h"
#include "cfgread.h"
#include "config-internal.h"
#include "config-load.h"

#define UNIX_PATH_BYTES sizeof(((struct sockaddr_un *)0)->sun_path)

/* "host:port" or "[v6addr]:port"; a v6 address may carry a "%scope". */
int
config_parse_hostport(const char *s, char **hostp, char **portp)
{
	const char *host, *hend, *port, *p;
	char addr[INET6_ADDRSTRLEN + 1];
	struct in6_addr in6;
	unsigned long v;
	size_t n;

	*hostp = *portp = NULL;
	if (s[0] == '[') {
		host = s + 1;
		if ((hend = strchr(host, ']')) == NULL || hend[1] != ':')
			goto invalid;
		port = hend + 2;
		n = strcspn(host, "%]");
		if (n == 0 || n >= sizeof addr)
			goto invalid;
		memcpy(addr, host, n);
		addr[n] = '\0';
		if (inet_pton(AF_INET6, addr, &in6) != 1)
			goto invalid;
		if (host[n] == '%') {
			if (host + n + 1 == hend)
				goto invalid;
			for (p = host + n + 1; p < hend; p++)
				if (!isalnum((unsigned char)*p) && *p != '.' &&
				    *p != '-' && *p != '_')
					goto invalid;
		}
	} else {
		if ((hend = strrchr(s, ':')) == NULL)
			goto invalid;
		host = s;
		port = hend + 1;
		/* An IPv6 address needs brackets; so does nothing else. */
		if (hend == host)
			goto invalid;
		for (p = host; p < hend; p++)
			if (!isalnum((unsigned char)*p) && *p != '.' &&
			    *p != '-' && *p != '_')
				goto invalid;
	}
	if (strlen(port) < 1 || strlen(port) > 5 ||
	    strspn(port, "0123456789") != strlen(port))
		goto invalid;
	v = strtoul(port, NULL, 10);
	if (v < 1 || v > 65535)
		goto invalid;
	if ((*hostp = strndup(host, (size_t)(hend - host))) == NULL ||
	    (*portp = strdup(port)) == NULL) {
		free(*hostp);
		*hostp = NULL;
		errno = ENOMEM;
		return -1;
	}
	return 0;

invalid:
	errno = EINVAL;
	return -1;
}

int
cfg_check_tcp(struct cfg_load *ld, const config_setting_t *s)
{
	char *host, *port, got[96];

	if (config_parse_hostport(config_setting_get_string(s), &host, &port) ==
	    -1) {
		if (errno == ENOMEM) {
			cfg_nomem(ld);
			return -1;
		}
		cfg_error(ld, s,
		    "expected \"host:port\" or \"[v6addr]:port\" "
		    "with a port from 1 to 65535, got %s",
		    cfg_repr(s, got, sizeof got));
		return -1;
	}
	free(host);
	free(port);
	return 0;
}

static int
cfg_check_unix(struct cfg_load *ld, const config_setting_t *s)
{
	size_t len = strlen(config_setting_get_string(s));

	if (len == 0 || len >= UNIX_PATH_BYTES) {
		cfg_error(ld, s,
		    "expected a socket path of 1 to %zu bytes, got "
		    "%zu bytes",
		    UNIX_PATH_BYTES - 1, len);
		return -1;
	}
	return 0;
}

/* A listener written as a group, { MEMBER = "..."; idle_timeout_s = N; }
 * (the rows of GROUP, "listen.tcp" or "listen.unix"): its MEMBER setting
 * into *V, its idle_timeout_s into *IDLE_S (-1 if not given). */
static int
cfg_listen_group(struct cfg_load *ld, const config_setting_t *e,
    const char *group, const char *member, const char *example,
    config_setting_t **v, int *idle_s)
{
	const char *const keys[] = { member, "idle_timeout_s", NULL };
	const struct setting *idle = cfg_row_of(group, "idle_timeout_s");
	unsigned secs;
	char got[96];
	int r;

	if (cfg_check_keys(ld, e, keys) == -1)
		return -1;
	if ((*v = config_setting_get_member(e, member)) == NULL) {
		cfg_error(ld, e,
		    "%s is missing; expected %s = \"%s\", the listener", member,
		    member, example);
		return -1;
	}
	if (config_setting_type(*v) != CONFIG_TYPE_STRING) {
		cfg_error(ld, *v, "expected a string such as \"%s\", got %s",
		    example, cfg_repr(*v, got, sizeof got));
		return -1;
	}
	if ((r = cfg_uint(ld, e, "idle_timeout_s", (unsigned)idle->min,
		 (unsigned)idle->max, &secs)) == -1)
		return -1;
	*idle_s = r == 1 ? (int)secs : -1;
	return 0;
}

/* listen.tcp or listen.unix: a list of distinct listeners, each a string
 * or a group with its own keys (cfg_listen_group, MEMBER its string), into
 * *OUT, where each is written into *AT, its idle_timeout_s into *IDLE_S. */
static int
cfg_listen_list(struct cfg_load *ld, const config_setting_t *listen,
    const char *key, const char *member, const char *example,
    int (*check)(struct cfg_load *, const config_setting_t *), char ***out,
    struct config_where **at, int **idle_s, size_t *n_out)
{
	config_setting_t *s, *e, *v;
	const char *str;
	char got[96], where[256], group[32];
	int i, j, n;

	if ((s = config_setting_get_member(listen, key)) == NULL)
		return 0;
	if (!config_setting_is_array(s) && !config_setting_is_list(s)) {
		cfg_error(ld, s,
		    "expected a list of strings such as [ \"%s\" ], "
		    "got %s",
		    example, cfg_repr(s, got, sizeof got));
		return -1;
	}
	n = config_setting_length(s);
	if (n == 0)
		return 0;
	snprintf(group, sizeof group, "listen.%s", key);
	if ((*out = calloc((size_t)n, sizeof **out)) == NULL ||
	    (*at = calloc((size_t)n, sizeof **at)) == NULL ||
	    (*idle_s = calloc((size_t)n, sizeof **idle_s)) == NULL) {
		cfg_nomem(ld);
		return -1;
	}
	for (i = 0; i < n; i++) {
		e = v = config_setting_get_elem(s, i);
		(*idle_s)[i] = -1;
		if (config_setting_is_group(e)) {
			if (cfg_listen_group(ld, e, group, member, example, &v,
				&(*idle_s)[i]) == -1)
				return -1;
		} else if (config_setting_type(e) != CONFIG_TYPE_STRING) {
			cfg_error(ld, e,
			    "expected a string such as \"%s\", or a group "
			    "such as { %s = \"%s\"; idle_timeout_s = 0; }, "
			    "got %s",
			    example, member, example,
			    cfg_repr(e, got, sizeof got));
			return -1;
		}
		str = config_setting_get_string(v);
		if (check(ld, v) == -1)
			return -1;
		for (j = 0; j < i; j++) {
			if (strcmp((*out)[j], str) == 0) {
				cfg_key_path(config_setting_get_elem(s, j),
				    where, sizeof where);
				cfg_error(ld, e,
				    "expected each listener once, "
				    "got %s again (first at %s)",
				    cfg_repr(v, got, sizeof got), where);
				return -1;
			}
		}
		if (cfg_strdup(ld, str, &(*out)[i]) == -1)
			return -1;
		(*at)[i] = cfg_at(ld, v);
		(*n_out)++;
	}
	return 0;
}

void
cfg_free_strings(char ***v, size_t *n)
{
	size_t i;

	for (i = 0; i < *n; i++)
		free((*v)[i]);
	free(*v);
	*v = NULL;
	*n = 0;
}

/* A list of listeners, where each is written and its idle_timeout_s. */
void
cfg_free_listeners(char ***v, struct config_where **at, int **idle_s, size_t *n)
{
	cfg_free_strings(v, n);
	free(*at);
	*at = NULL;
	free(*idle_s);
	*idle_s = NULL;
}

/* KEY of GROUP: an octal file mode such as "0660": 1 and *OUT, 0 if
 * absent, -1. */
int
cfg_mode(struct cfg_load *ld, const config_setting_t *g, const char *key,
    unsigned *out)
{
	const char *str;
	char got[96], *end;
	int r;

	if ((r = cfg_string(ld, g, key, 8, &str)) != 1)
		return r;
	unsigned long m = strtoul(str, &end, 8);
	if (*end || m > 0777 || str[0] != '0') {
		config_setting_t *s = config_setting_get_member(g, key);
		cfg_error(ld, s,
		    "expected an octal mode such as \"0660\", got %s",
		    cfg_repr(s, got, sizeof got));
		return -1;
	}
	*out = (unsigned)m;
	return 1;
}

/* KEY of G names a group: its name in *NAME and its gid in *GID.  1, 0 if
 * absent, -1 (an unknown group too). */
int
cfg_group_name(struct cfg_load *ld, const config_setting_t *g, const char *key,
    char **name, uint32_t *gid)
{
	const char *str;
	int r;

	if ((r = cfg_string(ld, g, key, 255, &str)) != 1)
		return r;
	if ((r = access_group_id(str, gid)) != 0) {
		cfg_error(ld, config_setting_get_member(g, key),
		    r == ENOENT ? "expected a known group, got \"%s\": no such "
				  "group" :
				  "cannot look up group \"%s\": %s",
		    str, strerror(r));
		return -1;
	}
	free(*name);
	*name = NULL;
	return cfg_strdup(ld, str, name) == -1 ? -1 : 1;
}

int
cfg_listen(struct cfg_load *ld, const config_setting_t *root,
    struct wbd_config *cfg)
{
	static const char *const keys[] = { "tcp", "unix", "unix_mode",
		"unix_group", NULL };
	config_setting_t *listen;
	int r;

	/* Absent: the default, 127.0.0.1:10809, from config_defaults(). */
	if ((r = cfg_group(ld, root, "listen", &listen)) <= 0)
		return r;
	cfg_free_listeners(&cfg->listen_tcp, &cfg->listen_tcp_at,
	    &cfg->listen_tcp_idle_s, &cfg->n_listen_tcp);
	if (cfg_check_keys(ld, listen, keys) == -1 ||
	    cfg_listen_list(ld, listen, "tcp", "address", WBD_DEFAULT_TCP,
		cfg_check_tcp, &cfg->listen_tcp, &cfg->listen_tcp_at,
		&cfg->listen_tcp_idle_s, &cfg->n_listen_tcp) == -1 ||
	    cfg_listen_list(ld, listen, "unix", "path", "/run/wbd/nbd.sock",
		cfg_check_unix, &cfg->listen_unix, &cfg->listen_unix_at,
		&cfg->listen_unix_idle_s, &cfg->n_listen_unix) == -1 ||
	    cfg_mode(ld, listen, "unix_mode", &cfg->unix_mode) == -1 ||
	    cfg_group_name(ld, listen, "unix_group", &cfg->unix_group,
		&cfg->unix_gid) == -1)
		return -1;
	if (cfg->n_listen_tcp + cfg->n_listen_unix == 0) {
		cfg_error(ld, listen,
		    "at least one listener expected, such as "
		    "tcp = [ \"%s\" ]; or unix = [ \"/run/wbd/nbd.sock\" ];",
		    WBD_DEFAULT_TCP);
		return -1;
	}
	return 0;
}
