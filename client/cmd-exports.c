/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cmd-exports.c - "wbctl exports": the exports the daemon serves.
 */
#include <stdio.h>

#include "ctl-client.h"
#include "table.h"
#include "wbctl.h"

static int
cmd_exports(struct wbctl *w, int argc, char **argv)
{
	static const char *const heads[] = {
		"NAME", ">SIZE", "CACHE MODE", "ACCESS", "DEVICE",
		"DESCRIPTION",
	};
	json_t *ans, *e;
	size_t i;
	int r;

	if ((r = wbctl_parse_no_opts(w, &cmd_exports_entry, argc, argv)) != -1)
		return r;
	r = cc_simple(w->socket_path, "exports", &ans);
	if (w->json && ans) {
		wbctl_print_json(stdout, ans);
	} else if (r == 0) {
		struct table t;
		char sz[32];

		table_init(&t, sizeof heads / sizeof heads[0], heads);
		json_array_foreach(json_object_get(ans, "exports"), i, e) {
			const char *d = jget_str(e, "description");
			table_add(&t, jget_str(e, "name"),
			    wbctl_human(jget_u64(e, "size_bytes", 0), sz,
			    sizeof sz),
			    jget_str(e, "cache_mode"),
			    jget_bool(e, "readonly") ? "ro" : "rw",
			    jget_str(e, "device"), d && *d ? d : "");
		}
		table_print(&t, stdout, "", 0);
		table_free(&t);
	}
	json_decref(ans);
	return r;
}

const struct wbctl_cmd cmd_exports_entry = {
	.name = "exports",
	.usage = "exports [--json]",
	.summary = "list the exports",
	.help =
	    "One line per export: its name, size, cache mode, ro or rw, the\n"
	    "writeback device (MAJ:MIN) it is on and its description.\n",
	.exec = cmd_exports,
};
