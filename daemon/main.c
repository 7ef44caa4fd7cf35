/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * main.c - wbd's entry point: options, usage, signals, and the order of
 * the daemon's lifecycle (daemon.c): load the configuration, open what can
 * fail on bad input, give up root (privs.c), detach, start, serve, shut
 * down, exit.
 *
 * The main thread runs the default libev loop: listeners, signals and the
 * tick.  See docs/architecture.md.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"
#include "config-load.h"
#include "ctl.h"
#include "daemon.h"
#include "log.h"
#include "privs.h"
#include "metrics-http.h"
#include "reload.h"
#include "service.h"
#include "size.h"
#include "wbnice.h"

static void
usage(FILE *f)
{
	fprintf(f,
	    "Usage: wbd [OPTION]...\n"
	    "Serve NBD exports from a write-back memory cache.\n"
	    "\n"
	    "  -c, --config=FILE     configuration file (default " WBD_DEFAULT_CONFIG
	    ")\n"
	    "  -f, --foreground      stay in the foreground and log to stderr\n"
	    "  -n, --check-config    check the configuration, print \"configuration OK\"\n"
	    "                        or the error, and exit (0 if OK, 1 if not)\n"
	    "  -v, --verbose         log more (repeat for debug detail)\n"
	    "  -V, --version         print the version and exit\n"
	    "  -h, --help            print this help and exit\n"
	    "\n"
	    "Signals: SIGTERM or SIGINT finish the requests in flight, write all\n"
	    "dirty data back, flush every backing device and exit (sent again,\n"
	    "they are answered with what is left: nothing is given up); SIGHUP rereads\n"
	    "the configuration file (as \"wbctl reload\" does, which also reports\n"
	    "whether it was applied).\n"
	    "\n"
	    "Under systemd (wbd.service, Type=notify) wbd reports readiness and\n"
	    "status, takes sockets from wbd.socket and logs with journal priorities.\n"
	    "\n"
	    "Connect with, for example:\n"
	    "  nbdinfo nbd://127.0.0.1:10809/EXPORT\n"
	    "  nbdinfo 'nbd+unix:///EXPORT?socket=/run/wbd/nbd.sock'\n"
	    "\n"
	    "See wbd(8), wbd.conf(5) and the docs (/usr/share/doc/wbd when packaged,\n"
	    "docs/ in the sources).\n");
}

struct main_signals {
	struct daemon *d;
	ev_signal term, intr, hup;
};

static void
main_stop_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct main_signals *s = w->data;
	char why[64];

	snprintf(why, sizeof why, "received %s", strsignal(w->signum));
	daemon_stop(s->d, why);
}

static void
main_again_handler(int sig)
{
	daemon_signal_again(sig);
}

/*
 * Once the loop has stopped for good, SIGTERM and SIGINT are no longer
 * its watchers' to take: a handler of their own hands them to the drain
 * (daemon_signal_again), which answers each; SIGHUP is ignored, as no
 * reload runs while stopping.
 */
static void
main_signals_shutdown(void)
{
	struct sigaction sa = { .sa_handler = main_again_handler };
	sigset_t set;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGHUP, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

static void
main_hup_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct main_signals *s = w->data;
	char msg[1024];

	log_info("received SIGHUP: rereading %s", s->d->cfg.path);
	service_reload(s->d, msg, sizeof msg);
}

static void
main_signals_start(struct main_signals *s, struct daemon *d)
{
	s->d = d;
	ev_signal_init(&s->term, main_stop_cb, SIGTERM);
	ev_signal_init(&s->intr, main_stop_cb, SIGINT);
	ev_signal_init(&s->hup, main_hup_cb, SIGHUP);
	s->term.data = s->intr.data = s->hup.data = s;
	ev_signal_start(d->loop, &s->term);
	ev_signal_start(d->loop, &s->intr);
	ev_signal_start(d->loop, &s->hup);
}

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57 /* Linux 5.6 */
#endif
/* What memory.lock wants beyond the cache: code, stacks, buffers. */
#define MAIN_MEMLOCK_MARGIN_BYTES (256ull << 20)

/*
 * A kernel client (nbd.ko) on this host writes back through wbd: if wbd's
 * own allocations wait on reclaim that waits on that writeback, both
 * stop.  PR_SET_IO_FLUSHER makes the kernel spare wbd that (no I/O in its
 * reclaim, no dirty throttling).  Set before any thread starts, so every
 * thread inherits it; it needs CAP_SYS_RESOURCE.
 *
 * Not getting it is said once, as loud as it matters: a warning with
 * memory.lock on (set for a kernel client on this host, docs/service.md);
 * else a line at info for root, at debug for another user, who cannot
 * attach /dev/nbdX anyway (scripts/demo.sh).
 */
static void
main_io_flusher(const struct wbd_config *cfg)
{
	char why[96];

	if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) == 0) {
		log_info("PR_SET_IO_FLUSHER set, for a kernel NBD client");
		return;
	}
	if (errno == EINVAL)
		snprintf(why, sizeof why,
		    ": not in this kernel (Linux 5.6 and later)");
	else if (errno == EPERM)
		snprintf(why, sizeof why,
		    " not permitted (it needs CAP_SYS_RESOURCE)");
	else
		snprintf(why, sizeof why, ": %s", strerror(errno));
	if (cfg->memory.lock)
		log_warnx("PR_SET_IO_FLUSHER%s: a kernel NBD client on this "
			  "host may stall wbd under memory pressure",
		    why);
	else if (geteuid() == 0)
		log_info("PR_SET_IO_FLUSHER%s", why);
	else
		log_debug("PR_SET_IO_FLUSHER%s", why);
}

/*
 * memory.lock: every page wbd has and will have stays in RAM (mlockall),
 * so that serving a kernel client never waits for swap.  Pages are locked
 * as they are first touched (MCL_ONFAULT), the cache as it fills.  An
 * unprivileged wbd needs a locked-memory limit above the cache: that is
 * checked before detaching, not discovered when the cache can no longer
 * grow.
 */
static int
main_lock_memory_check(const struct wbd_config *cfg)
{
	uint64_t want = cfg->cache.size_bytes + MAIN_MEMLOCK_MARGIN_BYTES;
	struct rlimit rl;
	char a[32], b[32];

	if (!cfg->memory.lock || geteuid() == 0 ||
	    getrlimit(RLIMIT_MEMLOCK, &rl) < 0 ||
	    rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want)
		return 0;
	log_errorx("memory.lock: the locked-memory limit (%s) is below the "
		   "cache and what wbd needs besides (%s): raise it "
		   "(LimitMEMLOCK=infinity, ulimit -l) or turn memory.lock off",
	    size_human(rl.rlim_cur, a, sizeof a),
	    size_human(want, b, sizeof b));
	return -1;
}

/* After detaching: locks are not inherited across fork. */
static int
main_lock_memory(const struct wbd_config *cfg)
{
	if (!cfg->memory.lock)
		return 0;
	if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) < 0 &&
	    (errno != EINVAL || mlockall(MCL_CURRENT | MCL_FUTURE) < 0)) {
		log_error("memory.lock: mlockall");
		return -1;
	}
	log_info("memory.lock: wbd's memory is locked in RAM");
	return 0;
}

/* Load the configuration at PATH into *CFG, its path as given (every
 * message names it so).  0 after printing its warnings, or -1 after
 * printing why. */
static int
main_load_config(const char *path, struct wbd_config *cfg)
{
	char err[1024];

	if (config_load(path, cfg, err, sizeof err) < 0) {
		if (log_to_journal())
			log_errorx("%s", err);
		else
			fprintf(stderr, "wbd: %s\n", err);
		return -1;
	}
	/* As the errors are (each line of cfg->warnings ends in "\n"). */
	for (const char *p = cfg->warnings; p && *p; p = strchr(p, '\n') + 1)
		fprintf(stderr, "wbd: warning: %.*s\n", (int)strcspn(p, "\n"),
		    p);
	return 0;
}

/* For a wbd that will detach: daemon() moves to "/", and a reload
 * rereads the file by its absolute path (found before giving up root). */
static void
main_config_path_absolute(struct wbd_config *cfg)
{
	char *abs = realpath(cfg->path, NULL);

	if (abs) {
		free(cfg->path);
		cfg->path = abs;
	}
}

/*
 * Request buffers of 64 KiB and more are mapped for themselves and kept
 * per thread (bufstash.h); what follows is for malloc's own.
 *
 * Request buffers (a READ's or WRITE's data, up to max_request_bytes) and
 * the read buffers of cache misses come and go by the thousand: keep them
 * in the heap, reused, rather than a fresh mmap(2) for each one above
 * 128 KiB.  glibc raises that threshold by itself after such a buffer is
 * freed, but not past a page-aligned one's padding (conn.c's
 * posix_memalign), so each 1 MiB request was a new mapping: page faults
 * and zeroing per request (cached 1 MiB reads at QD8: 197 MiB/s, 947 with
 * the threshold fixed, on the 2-core test VM).  Up to 64 MiB free at the
 * top of the heap is kept; what is in flight is bounded by the memory
 * budget anyway.
 *
 * Buffers of 2 MiB and more are mapped (and unmapped when freed): the
 * few requests that large would otherwise leave holes in the heap that
 * smaller buffers then fill in part, and the RSS crept (the soak,
 * tests/integration/test-soak-rss.sh, two runs side by side: with the
 * threshold at 32 MiB its minute's peak rose from 204 to 214 MiB over ten
 * minutes, at 2 MiB it stayed between 199 and 208).  The stash of each
 * thread (bufstash.h) keeps the largest for the next use all the same.
 */
static void
main_malloc_tune(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int arenas = cpus > 2 ? (int)cpus : 2;

	/* Few arenas: glibc's default, 8 per CPU, lets each thread free
	 * into an arena another then cannot take from, and the RSS grows far
	 * past the cache and the in-flight budget (measured on 2 CPUs, cache
	 * 128 MiB, 400 clients hanging up with 32 MiB each in flight: 1.2
	 * GiB with 16 arenas, 0.64 GiB with 2).  What stays free is trimmed
	 * by the tick (daemon.c). */
	if (mallopt(M_MMAP_THRESHOLD, 2 << 20) != 1 ||
	    mallopt(M_TRIM_THRESHOLD, 64 << 20) != 1 ||
	    mallopt(M_ARENA_MAX, arenas) != 1)
		/* Not glibc's malloc (a sanitizer's takes mallopt as a no-op
		 * that fails): slower, not wrong. */
		log_info("mallopt is not supported by this malloc: large "
			 "request buffers are mapped afresh");
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "check-config", no_argument, NULL, 'n' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config_path = WBD_DEFAULT_CONFIG;
	bool foreground = false, check_only = false;
	int verbosity = 0, ch;
	static struct daemon dstate;
	struct daemon *d = &dstate;
	struct main_signals sigs;
	struct service svc = { 0 };
	struct wbd_config cfg;
	struct metrics_http *mh = NULL;

	while ((ch = getopt_long(argc, argv, "c:fnvVh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			config_path = optarg;
			break;
		case 'f':
			foreground = true;
			break;
		case 'n':
			check_only = true;
			break;
		case 'v':
			verbosity++;
			break;
		case 'V':
			printf("wbd %s\n", WBD_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'wbd --help' for more information.\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "wbd: unexpected argument \"%s\"\n"
		    "Try 'wbd --help' for more information.\n", argv[optind]);
		return 2;
	}

	log_init("wbd", LOG_TO_STDERR, verbosity);
	if (main_load_config(config_path, &cfg) < 0)
		return 1;
	if (check_only) {
		daemon_warn_exposed(&cfg);
		/* Run by systemd: the unit's ExecStartPre=, before a start. */
		bool for_start = getenv("INVOCATION_ID") != NULL;
		int problems = check_host(&cfg, for_start);
		config_free(&cfg);
		if (problems)
			return 1;
		printf("configuration OK\n");
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	main_malloc_tune();
	if (!foreground)
		main_config_path_absolute(&cfg);

	/* Everything that can fail on bad input, before detaching; then
	 * root (if configured) is given up for good. */
	main_io_flusher(&cfg);
	privs_harden(&cfg.run_as);
	/* Each failure below has logged its cause, once, as an error. */
	if (daemon_init(d, &cfg) < 0 || main_lock_memory_check(&d->cfg) < 0 ||
	    daemon_open(d) < 0 || ctl_open(d) < 0 ||
	    metrics_http_open(d, &mh) < 0 || privs_drop(&d->cfg.run_as) < 0) {
		metrics_http_stop(mh);
		ctl_stop(d);
		daemon_free(d);
		return 1;
	}
	if (!foreground) {
		/* Nothing is cached yet: failing here loses nothing. */
		if (daemon(0, 0) < 0)
			fatalx("cannot detach: %s", strerror(errno));
		log_init("wbd", LOG_TO_SYSLOG, verbosity);
	}
	main_signals_start(&sigs, d);
	/* Said now if background writeback cannot run at a lower
	 * priority (after detaching: the probe reads the main thread). */
	(void)wbnice_supported(d->cfg.writeback.background_nice);
	if (main_lock_memory(&d->cfg) < 0 || daemon_start(d) < 0 ||
	    ctl_start(d) < 0 || metrics_http_start(mh) < 0) {
		daemon_shutdown(d);
		metrics_http_stop(mh);
		ctl_stop(d);
		daemon_free(d);
		return 1;
	}

	bool ok = service_start(&svc, d) == 0;
	if (ok)
		daemon_run(d);

	/* Stop accepting, finish what is in flight, write everything back;
	 * the control socket answers until the end. */
	main_signals_shutdown();
	service_stop(&svc);
	int failed = daemon_shutdown(d);
	metrics_http_stop(mh);
	ctl_stop(d);
	service_free(&svc);
	daemon_free(d);
	return failed || !ok ? 1 : 0;
}
