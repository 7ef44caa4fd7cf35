/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * wbctl.c - wbctl's entry point: global options, the command table, and
 * the helpers every command file shares.
 *
 * wbctl looks at and steers a running wbd through its control socket
 * (docs/control-protocol.md).  One file per command (cmd-*.c), each
 * described by a table entry.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-client.h"
#include "ctl-proto.h"
#include "size.h"
#include "wbctl.h"

static const struct wbctl_cmd *const wbctl_cmds[] = {
	&cmd_status_entry,
	&cmd_exports_entry,
	&cmd_tune_entry,
	&cmd_flush_entry,
	&cmd_reload_entry,
	&cmd_metrics_entry,
	&cmd_version_entry,
};
#define N_CMDS  (sizeof wbctl_cmds / sizeof wbctl_cmds[0])

static void
usage(FILE *f)
{
	fprintf(f,
"Usage: wbctl [OPTION]... COMMAND [ARG]...\n"
"Look at and steer a running wbd through its control socket.\n"
"\n"
"Options:\n"
"  -s, --socket=PATH   the control socket (default: $" WBCTL_SOCKET_ENV ",\n"
"                      else " WBD_DEFAULT_CONTROL ")\n"
"      --json          print the daemon's answer as JSON (for programs)\n"
"  -h, --help          print this help and exit\n"
"  -V, --version       print wbctl's version and exit\n"
"\n"
"Commands:\n");
	for (size_t i = 0; i < N_CMDS; i++) {
		const struct wbctl_cmd *c = wbctl_cmds[i];
		/* A long usage has its summary on a line of its own. */
		if (strlen(c->usage) > 28)
			fprintf(f, "  %s\n  %-28s %s\n", c->usage, "",
			    c->summary);
		else
			fprintf(f, "  %-28s %s\n", c->usage, c->summary);
	}
	fprintf(f,
"  %-28s %s\n"
"\n"
"Changing anything (tune KEY=VALUE, flush, reload) needs uid 0 or the\n"
"group control.admin_group of wbd.conf.\n"
"\n"
"Exit status:\n"
"  0  success\n"
"  1  the daemon reported a failure (EIO, ENOENT, EBUSY...)\n"
"  2  usage error: bad option, unknown command, malformed KEY=VALUE\n"
"  3  cannot reach the daemon (not running, no socket)\n"
"  4  permission denied (EPERM, or the socket's permissions)\n"
"  5  invalid key or value (EINVAL)\n"
"  6  protocol error (EPROTO, an answer wbctl cannot read, no answer)\n"
"\n"
"See wbctl(8).\n", "help [COMMAND]", "describe a command");
}

void
wbctl_err(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("wbctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int
wbctl_usage_err(const struct wbctl_cmd *c, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "wbctl: %s: ", c->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nUsage: wbctl %s\nTry 'wbctl %s --help'.\n",
	    c->usage, c->name);
	return WBCTL_EXIT_USAGE;
}

void
wbctl_cmd_help(const struct wbctl_cmd *c, FILE *f)
{
	fprintf(f, "Usage: wbctl [OPTION]... %s\n%s.\n", c->usage, c->summary);
	if (c->help && *c->help)
		fprintf(f, "\n%s", c->help);
	fprintf(f,
	    "\nOptions every command takes (--json also before it):\n"
	    "  -h, --help  print this help and exit\n"
	    "      --json  print the daemon's answer as JSON, for "
	    "programs\n");
	fprintf(f, "\nSee wbctl --help for the global options and the exit "
	    "status, wbctl(8) for the details.\n");
}

int
wbctl_common_opt(struct wbctl *w, const struct wbctl_cmd *c, int opt,
    char **argv)
{
	switch (opt) {
	case 'h':
		wbctl_cmd_help(c, stdout);
		return WBCTL_EXIT_OK;
	case WBCTL_OPT_JSON:
		w->json = true;
		return -1;
	case ':':
		return wbctl_usage_err(c, "option %s needs an argument",
		    argv[optind - 1]);
	default:
		return wbctl_usage_err(c, "unknown option %s",
		    argv[optind - 1]);
	}
}

int
wbctl_parse_no_opts(struct wbctl *w, const struct wbctl_cmd *c, int argc,
    char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "json", no_argument, NULL, WBCTL_OPT_JSON },
		{ NULL, 0, NULL, 0 },
	};
	int opt, r;

	optind = 0;
	while ((opt = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1)
		if ((r = wbctl_common_opt(w, c, opt, argv)) != -1)
			return r;
	if (optind < argc)
		return wbctl_usage_err(c, "unexpected argument \"%s\"",
		    argv[optind]);
	return -1;
}

void
wbctl_print_json(FILE *f, const json_t *j)
{
	json_dumpf(j, f, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
	fputc('\n', f);
}

uint64_t
jget_u64(const json_t *o, const char *key, uint64_t def)
{
	json_t *v = json_object_get(o, key);

	if (json_is_integer(v) && json_integer_value(v) >= 0)
		return (uint64_t)json_integer_value(v);
	if (json_is_real(v) && json_real_value(v) >= 0)
		return (uint64_t)json_real_value(v);
	return def;
}

const char *
jget_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

bool
jget_bool(const json_t *o, const char *key)
{
	return json_is_true(json_object_get(o, key));
}

const char *
wbctl_human(uint64_t n, char *buf, size_t len)
{
	return size_human(n, buf, len);
}

static const struct wbctl_cmd *
wbctl_find(const char *name)
{
	for (size_t i = 0; i < N_CMDS; i++)
		if (strcmp(wbctl_cmds[i]->name, name) == 0)
			return wbctl_cmds[i];
	return NULL;
}

/* wbctl help [COMMAND] */
static int
wbctl_help(int argc, char **argv)
{
	if (argc < 2) {
		usage(stdout);
		return WBCTL_EXIT_OK;
	}
	const struct wbctl_cmd *c = wbctl_find(argv[1]);
	if (!c) {
		wbctl_err("unknown command \"%s\"; try 'wbctl --help'",
		    argv[1]);
		return WBCTL_EXIT_USAGE;
	}
	wbctl_cmd_help(c, stdout);
	return WBCTL_EXIT_OK;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, WBCTL_OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct wbctl w = { .socket_path = getenv(WBCTL_SOCKET_ENV) };
	int opt;

	if (!w.socket_path || !*w.socket_path)
		w.socket_path = WBD_DEFAULT_CONTROL;
	while ((opt = getopt_long(argc, argv, "+:s:hV", longopts, NULL)) != -1) {
		switch (opt) {
		case 's':
			w.socket_path = optarg;
			break;
		case WBCTL_OPT_JSON:
			w.json = true;
			break;
		case 'h':
			usage(stdout);
			return WBCTL_EXIT_OK;
		case 'V':
			printf("wbctl %s (control protocol %d)\n", WBD_VERSION,
			    CTL_PROTOCOL_VERSION);
			return WBCTL_EXIT_OK;
		case ':':
			wbctl_err("option %s needs an argument; try 'wbctl "
			    "--help'", argv[optind - 1]);
			return WBCTL_EXIT_USAGE;
		default:
			wbctl_err("unknown option %s; try 'wbctl --help'",
			    argv[optind - 1]);
			return WBCTL_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		wbctl_err("no command given; try 'wbctl --help'");
		return WBCTL_EXIT_USAGE;
	}
	if (!*w.socket_path) {
		wbctl_err("the socket path is empty");
		return WBCTL_EXIT_USAGE;
	}

	argc -= optind;
	argv += optind;
	if (strcmp(argv[0], "help") == 0)
		return wbctl_help(argc, argv);
	const struct wbctl_cmd *c = wbctl_find(argv[0]);
	if (!c) {
		wbctl_err("unknown command \"%s\"; try 'wbctl --help'",
		    argv[0]);
		return WBCTL_EXIT_USAGE;
	}
	int r = c->exec(&w, argc, argv);
	if (fflush(stdout) == EOF && r == WBCTL_EXIT_OK) {
		wbctl_err("cannot write the output");
		return WBCTL_EXIT_FAILED;
	}
	return r;
}
