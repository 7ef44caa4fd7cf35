/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cmd-reload.c - "wbctl reload": make the daemon reread its
 * configuration, as SIGHUP does.
 */
#include <stdio.h>

#include "ctl-client.h"
#include "wbctl.h"

static int
cmd_reload(struct wbctl *w, int argc, char **argv)
{
	json_t *ans;
	int r;

	if ((r = wbctl_parse_no_opts(w, &cmd_reload_entry, argc, argv)) != -1)
		return r;
	r = cc_simple(w->socket_path, "reload", &ans);
	if (w->json && ans) {
		wbctl_print_json(stdout, ans);
	} else if (r == 0) {
		const char *m = jget_str(ans, "message");
		printf("%s\n", m ? m : "configuration reloaded");
	}
	json_decref(ans);
	return r;
}

const struct wbctl_cmd cmd_reload_entry = {
	.name = "reload",
	.usage = "reload [--json]",
	.summary = "reread the configuration file (as SIGHUP does)",
	.help =
	    "The daemon rereads its configuration file: thresholds and other runtime\n"
	    "settings apply at once, new exports appear, removed exports take no new\n"
	    "connections and go once written back and idle.  A file with an error is\n"
	    "rejected whole (exit status 1 or 5, with the error) and the running\n"
	    "configuration stays.  Prints the daemon's message.  Needs uid 0 or the\n"
	    "admin group.\n",
	.exec = cmd_reload,
};
