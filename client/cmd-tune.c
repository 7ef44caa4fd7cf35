/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cmd-tune.c - "wbctl tune": list the tunables like sysctl -a, show some,
 * or set them (KEY=VALUE...), globally, per device or per export.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-client.h"
#include "wbctl.h"

/* "10", "4M", "writeback"; a JSON null prints as "-". */
static void
tune_print_value(FILE *f, const json_t *v)
{
	if (json_is_string(v))
		fputs(json_string_value(v), f);
	else if (json_is_integer(v))
		fprintf(f, "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		fprintf(f, "%g", json_real_value(v));
	else if (json_is_boolean(v))
		fputs(json_is_true(v) ? "true" : "false", f);
	else
		fputs("-", f);
}

/* "key = value unit" */
static void
tune_print(FILE *f, const json_t *t)
{
	const char *unit = jget_str(t, "unit");

	fprintf(f, "%s = ", jget_str(t, "key"));
	tune_print_value(f, json_object_get(t, "value"));
	if (unit && *unit && !json_is_null(json_object_get(t, "value")))
		fprintf(f, " %s", unit);
	fputc('\n', f);
}

static bool
tune_wanted(const char *key, char **keys, size_t nkeys)
{
	if (nkeys == 0)
		return true;
	for (size_t i = 0; i < nkeys; i++)
		if (key && strcmp(key, keys[i]) == 0)
			return true;
	return false;
}

/* A KEY=VALUE's value: a JSON integer if it is all digits, else a string
 * for the daemon to parse ("4M", "writeback"). */
static json_t *
tune_value(const char *s)
{
	if (*s && strspn(s, "0123456789") == strlen(s)) {
		char *end;
		errno = 0;
		long long n = strtoll(s, &end, 10);
		if (!errno && !*end)
			return json_integer(n);
	}
	return json_string(s);
}

/* List the tunables (all, or those in KEYS) on an open connection. */
static int
tune_list(struct wbctl *w, struct cc_conn *c, char **keys, size_t nkeys)
{
	json_t *req = json_pack("{s:s}", "cmd", "tune"), *ans, *t;
	size_t i;
	int r = cc_call(c, req, CC_TIMEOUT_MS, NULL, NULL, &ans);

	json_decref(req);
	if (r || w->json) {
		if (w->json && ans)
			wbctl_print_json(stdout, ans);
		json_decref(ans);
		return r;
	}
	json_t *list = json_object_get(ans, "tunables");
	for (size_t k = 0; k < nkeys; k++) {
		json_array_foreach(list, i, t)
			if (strcmp(jget_str(t, "key") ? jget_str(t, "key") :
			    "", keys[k]) == 0)
				break;
		if (i == json_array_size(list)) {
			wbctl_err("tune: unknown key \"%s\"; 'wbctl tune' "
			    "lists them", keys[k]);
			json_decref(ans);
			return WBCTL_EXIT_INVALID;
		}
	}
	json_array_foreach(list, i, t)
		if (tune_wanted(jget_str(t, "key"), keys, nkeys))
			tune_print(stdout, t);
	json_decref(ans);
	return 0;
}

static int
tune_change(struct wbctl *w, struct cc_conn *c, char **args, size_t n)
{
	json_t *set = json_object(), *ans, *k;
	size_t i;
	int r;

	for (i = 0; i < n; i++) {
		char *eq = strchr(args[i], '=');
		*eq = '\0';
		json_object_set_new(set, args[i], tune_value(eq + 1));
		*eq = '=';
	}
	json_t *req = json_pack("{s:s,s:o}", "cmd", "tune", "set", set);
	r = cc_call(c, req, CC_TIMEOUT_MS, NULL, NULL, &ans);
	json_decref(req);
	if (r || w->json) {
		if (w->json && ans)
			wbctl_print_json(stdout, ans);
		json_decref(ans);
		return r;
	}

	/* Show the new values of what changed, as sysctl -w does. */
	json_t *changed = json_object_get(ans, "changed");
	size_t nch = json_array_size(changed);
	char **keys = calloc(nch + 1, sizeof *keys);
	if (!keys) {
		json_decref(ans);
		return WBCTL_EXIT_FAILED;
	}
	json_array_foreach(changed, i, k)
		keys[i] = (char *)(json_string_value(k) ?
		    json_string_value(k) : "");
	if (nch == 0)
		printf("nothing changed\n");
	else
		r = tune_list(w, c, keys, nch);
	free(keys);
	json_decref(ans);
	return r;
}

static int
cmd_tune(struct wbctl *w, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "json", no_argument, NULL, WBCTL_OPT_JSON },
		{ NULL, 0, NULL, 0 },
	};
	const struct wbctl_cmd *me = &cmd_tune_entry;
	size_t nset = 0;
	int opt, r;

	optind = 0;
	while ((opt = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1)
		if ((r = wbctl_common_opt(w, me, opt, argv)) != -1)
			return r;
	argc -= optind;
	argv += optind;
	for (int i = 0; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		if (eq == argv[i] || (eq && eq[1] == '\0'))
			return wbctl_usage_err(me, "\"%s\" is not KEY=VALUE",
			    argv[i]);
		if (eq)
			nset++;
	}
	if (nset && nset != (size_t)argc)
		return wbctl_usage_err(me, "either show KEYs or set "
		    "KEY=VALUEs, not both");

	struct cc_conn c;
	if ((r = cc_open(&c, w->socket_path)))
		return r;
	if (nset)
		r = tune_change(w, &c, argv, nset);
	else
		r = tune_list(w, &c, argv, (size_t)argc);
	cc_close(&c);
	return r;
}

const struct wbctl_cmd cmd_tune_entry = {
	.name = "tune",
	.usage = "tune [--json] [KEY... | KEY=VALUE...]",
	.summary = "show or set the tunables",
	.help =
	    "Without arguments, prints every tunable as \"KEY = VALUE UNIT\", like\n"
	    "sysctl -a; of a threshold's _ratio and _bytes forms, the one not in use\n"
	    "shows \"-\".  With KEYs, prints only those.  With KEY=VALUEs, sets them\n"
	    "all at once (or none, if any is invalid: exit status 5) and prints the\n"
	    "new values of those that changed; setting needs uid 0 or the admin\n"
	    "group.\n"
	    "\n"
	    "Keys have wbd.conf's names, units and rules (sizes such as \"64M\"):\n"
	    "  dirty_background_ratio, dirty_background_bytes, dirty_ratio,\n"
	    "  dirty_bytes, dirty_expire_centisecs, dirty_writeback_centisecs,\n"
	    "  min_workers, max_workers, worker_spawn_ms, worker_idle_ms,\n"
	    "  background_nice\n"
	    "  device.MAJ:MIN.min_ratio, device.MAJ:MIN.max_ratio\n"
	    "  export.NAME.cache_mode\n"
	    "Setting a _ratio threshold clears its _bytes form and vice versa.\n"
	    "Changes take effect at once; they are not written to wbd.conf, so a\n"
	    "restart or a reload applies the file's values again.\n"
	    "\n"
	    "Example: wbctl tune dirty_background_bytes=64M dirty_expire_centisecs=1000\n",
	.exec = cmd_tune,
};
