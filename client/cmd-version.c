/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cmd-version.c - "wbctl version": the versions of wbctl, of the daemon
 * and of the control protocol the daemon speaks.
 */
#include <stdio.h>

#include "ctl-client.h"
#include "wbctl.h"

static int
cmd_version(struct wbctl *w, int argc, char **argv)
{
	json_t *ans;
	int r;

	if ((r = wbctl_parse_no_opts(w, &cmd_version_entry, argc, argv)) != -1)
		return r;
	r = cc_simple(w->socket_path, "version", &ans);
	if (w->json && ans) {
		if (r == 0)
			json_object_set_new(ans, "client_version",
			    json_string(WBD_VERSION));
		wbctl_print_json(stdout, ans);
	} else if (r == 0) {
		const char *dv = jget_str(ans, "daemon_version");
		printf("wbctl %s\n", WBD_VERSION);
		printf("wbd %s\n", dv ? dv : "(unknown)");
		printf("control protocol %llu\n", (unsigned long long)
		    jget_u64(ans, "protocol", CTL_PROTOCOL_VERSION));
	}
	json_decref(ans);
	return r;
}

const struct wbctl_cmd cmd_version_entry = {
	.name = "version",
	.usage = "version [--json]",
	.summary = "print the versions of wbctl, of wbd and of the protocol",
	.help =
	    "Prints three lines: wbctl's version, the running daemon's version and\n"
	    "the control protocol version the daemon speaks.  With --json, the\n"
	    "daemon's answer with \"client_version\" added.\n",
	.exec = cmd_version,
};
