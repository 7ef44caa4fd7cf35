/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cmd-metrics.c - "wbctl metrics": the daemon's metrics in the Prometheus
 * text format, on stdout or into a file replaced whole (for
 * node_exporter's textfile collector).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl-client.h"
#include "wbctl.h"

/* TEXT into PATH, through a temporary file renamed over it, so that a
 * reader never sees half of it. */
static int
metrics_write_file(const char *path, const char *text, size_t len)
{
	size_t n = strlen(path) + 16;
	char *tmp = malloc(n);
	FILE *f;

	if (!tmp) {
		wbctl_err("out of memory");
		return WBCTL_EXIT_FAILED;
	}
	snprintf(tmp, n, "%s.tmp%ld", path, (long)getpid());
	f = fopen(tmp, "w");
	if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0) {
		wbctl_err("%s: %s", tmp, strerror(errno));
		if (f)
			unlink(tmp);
		free(tmp);
		return WBCTL_EXIT_FAILED;
	}
	if (rename(tmp, path) < 0) {
		wbctl_err("%s: %s", path, strerror(errno));
		unlink(tmp);
		free(tmp);
		return WBCTL_EXIT_FAILED;
	}
	free(tmp);
	return WBCTL_EXIT_OK;
}

static int
cmd_metrics(struct wbctl *w, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ "json", no_argument, NULL, WBCTL_OPT_JSON },
		{ NULL, 0, NULL, 0 },
	};
	const struct wbctl_cmd *me = &cmd_metrics_entry;
	const char *output = NULL;
	json_t *ans;
	int opt, r;

	optind = 0;
	while ((opt = getopt_long(argc, argv, "+:ho:", longopts, NULL)) != -1) {
		if (opt == 'o')
			output = optarg;
		else if ((r = wbctl_common_opt(w, me, opt, argv)) != -1)
			return r;
	}
	if (optind < argc)
		return wbctl_usage_err(me, "unexpected argument \"%s\"",
		    argv[optind]);
	r = cc_simple(w->socket_path, "metrics", &ans);
	if (w->json && ans) {
		wbctl_print_json(stdout, ans);
	} else if (r == 0) {
		json_t *t = json_object_get(ans, "text");
		if (!json_is_string(t)) {
			wbctl_err("the daemon's answer has no \"text\"");
			r = WBCTL_EXIT_PROTOCOL;
		} else if (output) {
			r = metrics_write_file(output, json_string_value(t),
			    json_string_length(t));
		} else {
			fwrite(json_string_value(t), 1, json_string_length(t),
			    stdout);
		}
	}
	json_decref(ans);
	return r;
}

const struct wbctl_cmd cmd_metrics_entry = {
	.name = "metrics",
	.usage = "metrics [-o FILE] [--json]",
	.summary = "print the metrics in the Prometheus text format",
	.help =
	    "Prints the daemon's metrics in the Prometheus text exposition format\n"
	    "(version 0.0.4): the cache, each export's requests, bytes, errors and\n"
	    "latency histograms, each writeback device's work by reason, throttling,\n"
	    "remotes.  docs/metrics.md describes every metric.\n"
	    "\n"
	    "  -o, --output=FILE   write them to FILE instead, replacing it whole\n"
	    "                      (a temporary file renamed over it), as\n"
	    "                      node_exporter's textfile collector wants\n",
	.exec = cmd_metrics,
};
