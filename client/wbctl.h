/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * wbctl.h - what wbctl's command files share: the global options, the
 * command table entry, the exit codes and the output helpers.
 *
 * wbctl is single-threaded; main() (wbctl.c) parses the global options,
 * finds the command in the table and runs it.  Each command lives in its
 * own file (cmd-NAME.c), parses its own options and talks to the daemon
 * through ctl-client.h.
 */
#ifndef WBCTL_H
#define WBCTL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#define WBCTL_SOCKET_ENV        "WBD_CONTROL_SOCKET"

/* Exit codes: documented in --help and wbctl(8). */
enum wbctl_exit {
	WBCTL_EXIT_OK = 0,
	WBCTL_EXIT_FAILED = 1,          /* the daemon reported a failure */
	WBCTL_EXIT_USAGE = 2,           /* bad option, command or argument */
	WBCTL_EXIT_UNREACHABLE = 3,     /* no daemon on the socket */
	WBCTL_EXIT_DENIED = 4,          /* EPERM, or the socket's permissions */
	WBCTL_EXIT_INVALID = 5,         /* EINVAL: unknown key, bad value */
	WBCTL_EXIT_PROTOCOL = 6,        /* EPROTO, or an answer we cannot read */
};

/* The global options, passed to every command. */
struct wbctl {
	const char *socket_path;
	bool json;                      /* --json: print the daemon's answer */
};

struct wbctl_cmd {
	const char *name;
	const char *usage;              /* "status [-w [SECS]]" */
	const char *summary;            /* one line, for wbctl --help */
	const char *help;               /* the rest of "wbctl help CMD" */
	int (*exec)(struct wbctl *w, int argc, char **argv);
};

extern const struct wbctl_cmd cmd_status_entry;
extern const struct wbctl_cmd cmd_tune_entry;
extern const struct wbctl_cmd cmd_flush_entry;
extern const struct wbctl_cmd cmd_exports_entry;
extern const struct wbctl_cmd cmd_version_entry;
extern const struct wbctl_cmd cmd_reload_entry;
extern const struct wbctl_cmd cmd_metrics_entry;

/* Print "wbctl: MESSAGE" on stderr. */
void wbctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print "wbctl: CMD: MESSAGE" and a hint to --help; returns
 * WBCTL_EXIT_USAGE. */
int wbctl_usage_err(const struct wbctl_cmd *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Print the usage and help text of C on F. */
void wbctl_cmd_help(const struct wbctl_cmd *c, FILE *f);

/* getopt_long's value for --json, which every command also accepts. */
#define WBCTL_OPT_JSON          0x100

/*
 * The options every command takes: -h/--help and --json.  Returns -1 when
 * the command should go on, else the exit code to return (after printing
 * the help, or a usage error for '?' and ':').
 */
int wbctl_common_opt(struct wbctl *w, const struct wbctl_cmd *c, int opt,
    char **argv);

/*
 * Option parsing for a command that takes no options or operands of its
 * own: returns -1 when the command should go on, or the exit code.
 */
int wbctl_parse_no_opts(struct wbctl *w, const struct wbctl_cmd *c,
    int argc, char **argv);

/*
 * Print J on F as indented JSON, the --json form.  A real is printed with
 * at most 15 significant digits: what the daemon sent comes out as it
 * was (any decimal of up to 15 digits survives the round trip through a
 * double), and never as the double's 17-digit expansion
 * (0.29999999999999999 for 0.3).
 */
void wbctl_print_json(FILE *f, const json_t *j);

/* Members of a JSON object read leniently: a missing or mistyped member
 * reads as DEF (or NULL). */
uint64_t jget_u64(const json_t *o, const char *key, uint64_t def);
const char *jget_str(const json_t *o, const char *key);
bool jget_bool(const json_t *o, const char *key);

/* "1.5 GiB", "0 B" into BUF. */
const char *wbctl_human(uint64_t n, char *buf, size_t len);

#endif
