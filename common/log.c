/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * log.c - logging to stderr, the journal or syslog.  No state but the
 * destination and the verbosity, both set once at start-up (log_init), and
 * per thread the quiet flag and a capture buffer.
 *
 * On stderr a line is "HH:MM:SS.mmm wbd: LEVEL: message", unless stderr
 * is the journal's stream ($JOURNAL_STREAM names its device and inode, as
 * systemd sets it for a service): then it is "<N>LEVEL: message", N the
 * syslog priority, which the journal reads and removes, and which carries
 * its own time and name.  To syslog, the message with its priority.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "atomics.h"
#include "log.h"

static enum log_dest log_dest = LOG_TO_STDERR;
static bool log_journal;
static _Atomic int log_verbosity;
static const char *log_ident = "wbd";
static _Thread_local bool log_thread_quiet;
static _Thread_local char *log_capture_buf;
static _Thread_local size_t log_capture_len;

void
log_set_thread_quiet(bool quiet)
{
	log_thread_quiet = quiet;
}

/* Is stderr the journal's stream ($JOURNAL_STREAM is "DEV:INODE")? */
static bool
log_stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 ||
	    fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino;
}

void
log_init(const char *ident, enum log_dest dest, int verbosity)
{
	log_ident = ident;
	log_dest = dest;
	store_relaxed(&log_verbosity, verbosity);
	log_journal = dest == LOG_TO_STDERR && log_stderr_is_journal();
	if (dest == LOG_TO_SYSLOG)
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

bool
log_to_journal(void)
{
	return log_journal;
}

int
log_get_verbosity(void)
{
	return load_relaxed(&log_verbosity);
}

void
log_capture_begin(char *buf, size_t len)
{
	log_capture_buf = len ? buf : NULL;
	log_capture_len = len;
	if (len)
		buf[0] = '\0';
}

void
log_capture_end(void)
{
	log_capture_buf = NULL;
	log_capture_len = 0;
}

/* A warning or an error on a capturing thread: into its buffer. */
static void
log_capture(const char *msg)
{
	size_t n = strlen(log_capture_buf);

	if (n + 1 < log_capture_len)
		snprintf(log_capture_buf + n, log_capture_len - n, "%s%s",
		    n ? "; " : "", msg);
}

static void __attribute__((format(printf, 2, 0)))
log_vemit(int prio, const char *fmt, va_list ap, int errnum)
{
	char msg[1024];
	int n = vsnprintf(msg, sizeof msg, fmt, ap);

	if (n < 0)
		return;
	if (errnum && (size_t)n < sizeof msg)
		snprintf(msg + n, sizeof msg - n, ": %s", strerror(errnum));
	/* One line, whatever a client sent (an export name, a TLS
	 * identity): a newline would start a line of the client's own, with
	 * a priority the journal believes. */
	for (char *p = msg; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';

	if (log_capture_buf && prio <= LOG_WARNING) {
		log_capture(msg);
		return;
	}
	if (log_dest == LOG_TO_SYSLOG) {
		syslog(prio, "%s", msg);
		return;
	}
	const char *level = prio <= LOG_ERR ? "error: " :
	    prio == LOG_WARNING             ? "warning: " :
	    prio == LOG_DEBUG               ? "debug: " :
					      "";
	/* One fprintf per line keeps lines from different threads whole. */
	if (log_journal) {
		fprintf(stderr, "<%d>%s%s\n", prio, level, msg);
		return;
	}
	struct timespec ts;
	struct tm tm;
	char stamp[32];
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
	fprintf(stderr, "%s.%03ld %s: %s%s\n", stamp, ts.tv_nsec / 1000000,
	    log_ident, level, msg);
}

#define LOG_BODY(prio, errnum) do {		\
	va_list ap;				\
	va_start(ap, fmt);			\
	log_vemit(prio, fmt, ap, errnum);	\
	va_end(ap);				\
} while (0)

/* A warning, or a debug message from a quiet thread. */
#define WARN_PRIO() (log_thread_quiet ? LOG_DEBUG : LOG_WARNING)
#define WARN_SHOWN() (!log_thread_quiet || log_get_verbosity() >= 1)

void
log_warn(const char *fmt, ...)
{
	int saved = errno;
	if (WARN_SHOWN())
		LOG_BODY(WARN_PRIO(), saved);
	errno = saved;
}

void
log_warnx(const char *fmt, ...)
{
	if (WARN_SHOWN())
		LOG_BODY(WARN_PRIO(), 0);
}

void
log_error(const char *fmt, ...)
{
	int saved = errno;
	LOG_BODY(LOG_ERR, saved);
	errno = saved;
}

void
log_errorx(const char *fmt, ...)
{
	LOG_BODY(LOG_ERR, 0);
}

void
log_info(const char *fmt, ...)
{
	LOG_BODY(LOG_INFO, 0);
}

void
log_debug(const char *fmt, ...)
{
	if (log_get_verbosity() < 1)
		return;
	LOG_BODY(LOG_DEBUG, 0);
}

void
fatalx(const char *fmt, ...)
{
	LOG_BODY(LOG_ERR, 0);
	exit(1);
}
