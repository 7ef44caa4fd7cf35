/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cmd-flush.c - "wbctl flush": write back every dirty page of some or all
 * exports and flush their backing stores, waiting (with a progress bar on
 * a terminal) or only queueing the work.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ctl-client.h"
#include "wbctl.h"

#define FLUSH_BAR_WIDTH 30

struct flush_progress {
	bool tty;                       /* draw a bar on stderr */
	bool drawn;                     /* a bar is on the line */
	bool shown;                     /* a report was shown */
	uint64_t total;                 /* the most ever remaining */
	uint64_t left;                  /* remaining in the last report */
};

/* Find a byte count in a progress line: in its "progress" object, or
 * beside it. */
static bool
flush_field(const json_t *line, const char *key, uint64_t *out)
{
	const json_t *p = json_object_get(line, "progress");
	const json_t *v = json_is_object(p) ? json_object_get(p, key) : NULL;

	if (!json_is_integer(v))
		v = json_object_get(line, key);
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (uint64_t)json_integer_value(v);
	return true;
}

/* Show LEFT of the total remaining: a line, or the bar redrawn. */
static void
flush_show(struct flush_progress *fp, uint64_t left)
{
	char a[32], b[32];

	if (left > fp->total)
		fp->total = left;
	fp->left = left;
	fp->shown = true;
	wbctl_human(left, a, sizeof a);
	wbctl_human(fp->total, b, sizeof b);
	if (!fp->tty) {
		fprintf(stderr, "flush: %s of %s remaining\n", a, b);
		return;
	}
	unsigned done = fp->total ? (unsigned)((fp->total - left) *
	    FLUSH_BAR_WIDTH / fp->total) : FLUSH_BAR_WIDTH;
	unsigned pct = fp->total ? (unsigned)((fp->total - left) * 100 /
	    fp->total) : 100;
	char bar[FLUSH_BAR_WIDTH + 1];
	memset(bar, '#', done);
	memset(bar + done, '.', FLUSH_BAR_WIDTH - done);
	bar[FLUSH_BAR_WIDTH] = '\0';
	fprintf(stderr, "\r\033[Kflush [%s] %3u%%  %s of %s remaining", bar,
	    pct, a, b);
	fp->drawn = true;
}

static void
flush_on_progress(void *arg, const json_t *line)
{
	struct flush_progress *fp = arg;
	uint64_t left, total;

	if (!flush_field(line, "remaining_bytes", &left) &&
	    !flush_field(line, "dirty_bytes", &left))
		return;
	if (flush_field(line, "total_bytes", &total) && total > fp->total)
		fp->total = total;
	flush_show(fp, left);
}

static int
cmd_flush(struct wbctl *w, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "all", no_argument, NULL, 'a' },
		{ "no-wait", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ "json", no_argument, NULL, WBCTL_OPT_JSON },
		{ NULL, 0, NULL, 0 },
	};
	const struct wbctl_cmd *me = &cmd_flush_entry;
	bool all = false, wait = true;
	int opt, r;

	optind = 0;
	while ((opt = getopt_long(argc, argv, "+:ah", longopts, NULL)) != -1) {
		switch (opt) {
		case 'a':
			all = true;
			break;
		case 'n':
			wait = false;
			break;
		default:
			if ((r = wbctl_common_opt(w, me, opt, argv)) != -1)
				return r;
		}
	}
	if (all && optind < argc)
		return wbctl_usage_err(me, "--all and export names exclude "
		    "each other");

	struct flush_progress fp = { .tty = isatty(STDERR_FILENO) };
	bool progress = wait && !w->json;
	json_t *names = json_array(), *ans;
	for (int i = optind; i < argc; i++)
		json_array_append_new(names, json_string(argv[i]));
	json_t *req = json_pack("{s:s,s:o,s:b,s:b}", "cmd", "flush",
	    "exports", names, "wait", wait, "progress", progress);

	struct cc_conn c;
	if ((r = cc_open(&c, w->socket_path))) {
		json_decref(req);
		return r;
	}
	r = cc_call(&c, req, wait ? -1 : CC_TIMEOUT_MS,
	    progress ? flush_on_progress : NULL, &fp, &ans);
	json_decref(req);
	cc_close(&c);
	/* The daemon's last report came before the last of the writeback:
	 * once it answers that all is done, nothing remains. */
	if (r == 0 && fp.shown && fp.left > 0)
		flush_show(&fp, 0);
	if (fp.drawn) {
		/* Leave the bar at its end, then the result below. */
		fputc('\n', stderr);
	}
	if (w->json && ans) {
		wbctl_print_json(stdout, ans);
	} else if (r == 0) {
		json_t *fl = json_object_get(ans, "flushed"), *n;
		size_t i;
		printf("%s", wait ? "flushed" : "writeback queued for");
		if (json_array_size(fl) == 0)
			printf(" nothing");
		json_array_foreach(fl, i, n)
			printf("%s %s", i ? "," : "", json_string_value(n) ?
			    json_string_value(n) : "?");
		putchar('\n');
	}
	json_decref(ans);
	return r;
}

const struct wbctl_cmd cmd_flush_entry = {
	.name = "flush",
	.usage = "flush [--no-wait] [--json] [EXPORT... | --all]",
	.summary = "write back and flush exports (default: all)",
	.help =
	    "Writes back every dirty page of the EXPORTs (all exports with --all or\n"
	    "without names) and flushes their backing stores, waiting until done:\n"
	    "on a terminal with a progress bar of the bytes remaining on stderr,\n"
	    "otherwise with one \"flush: X of Y remaining\" line per progress report;\n"
	    "once done, the bar reaches 100% and the last line says \"0 B of Y\".\n"
	    "Then prints the exports flushed.  Needs uid 0 or the admin group.\n"
	    "A writeback or flush error is exit status 1; an unknown export too.\n"
	    "\n"
	    "  -a, --all      flush every export\n"
	    "      --no-wait  only queue the writeback and return at once\n",
	.exec = cmd_flush,
};
