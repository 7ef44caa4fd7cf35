/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * log.h - wbd's small logging API, in the OpenBSD daemons' style.
 *
 * log_warn() and log_error() append strerror(errno), log_warnx() and
 * log_errorx() do not.  Messages go to stderr while the daemon runs in the
 * foreground (with syslog priorities for the journal, when stderr is its
 * stream) and to syslog otherwise.
 * Every function is safe to call from any thread.
 */
#ifndef WBD_LOG_H
#define WBD_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

enum log_dest { LOG_TO_STDERR, LOG_TO_SYSLOG };

/* DEST LOG_TO_STDERR writes for the journal when stderr is its stream. */
void log_init(const char *ident, enum log_dest dest, int verbosity);
/* Do the lines go to the journal (stderr is $JOURNAL_STREAM)? */
bool log_to_journal(void);
int log_get_verbosity(void);

void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* An error: what stops wbd from starting, or data it cannot keep. */
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_errorx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * While QUIET is set, this thread's warnings are logged as debug messages:
 * for work that repeats a failure already reported (a connection retried
 * every few seconds), so the log says it once, not every time.
 */
void log_set_thread_quiet(bool quiet);
/*
 * Until log_capture_end, this thread's warnings and errors are not logged
 * but kept in BUF (LEN bytes), "; " between them: for a caller that adds
 * what the callee cannot know (the file and line of an export) and logs
 * the failure once, as an error or a warning as it turns out.
 */
void log_capture_begin(char *buf, size_t len);
void log_capture_end(void);
/* Only during start-up: logs and exits 1. */
void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
