/*
 * main.c - wbd's entry point: options, start-up, signals and shutdown.
 *
 * The main thread runs the default libev loop: listeners and signals.  It
 * starts one I/O thread per CPU (or io_threads) and one worker pool per
 * writeback device; see docs/architecture.md.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "backing.h"
#include "cache.h"
#include "config.h"
#include "ctl.h"
#include "daemon.h"
#include "export.h"
#include "ioloop.h"
#include "listener.h"
#include "log.h"
#include "nbd-proto.h"
#include "pending.h"
#include "size.h"
#include "wbdev.h"

#define MAX_IO_THREADS          64
#define DAEMON_TICK_S           0.1

static void
usage(FILE *f)
{
	fprintf(f,
"Usage: wbd [OPTION]...\n"
"Serve NBD exports from a write-back memory cache.\n"
"\n"
"  -c, --config=FILE     configuration file (default " WBD_DEFAULT_CONFIG ")\n"
"  -f, --foreground      stay in the foreground and log to stderr\n"
"  -n, --check-config    check the configuration, print \"configuration OK\"\n"
"                        or the error, and exit (0 if OK, 1 if not)\n"
"  -v, --verbose         log more (repeat for debug detail)\n"
"  -V, --version         print the version and exit\n"
"  -h, --help            print this help and exit\n"
"\n"
"Signals: SIGTERM or SIGINT finish the requests in flight, flush every\n"
"backing device and exit.\n"
"\n"
"Connect with, for example:\n"
"  nbdinfo nbd://127.0.0.1:10809/EXPORT\n"
"  nbdinfo 'nbd+unix:///EXPORT?socket=/run/wbd/nbd.sock'\n"
"\n"
"See wbd(8) and docs/ for the configuration file.\n");
}

/* Open the backing devices: files, block devices, remote NBD servers
 * (no threads yet). */
static int
daemon_open_backends(struct daemon *d, struct backend **backends)
{
	for (size_t i = 0; i < d->cfg.n_exports; i++) {
		const struct export_conf *ec = &d->cfg.exports[i];
		backends[i] = backing_open(ec, &d->cfg.remote);
		if (!backends[i] && pending_wanted(ec, errno) &&
		    pending_add(d->pending, ec, &d->cfg.remote) == 0)
			continue;       /* served once its remote answers */
		if (!backends[i]) {
			log_warnx("%s:%d: export \"%s\": cannot open backing "
			    "\"%s\"", d->cfg.path, ec->line, ec->name,
			    ec->backing);
			return -1;
		}
	}
	return 0;
}

static int
daemon_create_cache(struct daemon *d)
{
	struct cache_params cp = {
		.size_bytes = d->cfg.cache.size_bytes,
		.page_size = d->cfg.cache.page_size,
		.chunk_bytes = (uint32_t)d->cfg.writeback.max_io_bytes,
	};
	char a[32], b[32], l[32];

	d->cache = cache_new(&cp);
	if (!d->cache) {
		log_warn("cannot set up a %llu-byte cache",
		    (unsigned long long)cp.size_bytes);
		return -1;
	}
	cache_set_zero_copy(d->cache, true);
	wb_ctl_init(&d->wb, d->cache, &d->cfg);
	log_info("cache: %s in %u-byte pages; dirty background %s, limit %s",
	    size_human(d->wb.total_pages * d->wb.page_size, a, sizeof a),
	    d->wb.page_size,
	    size_human(d->wb.bg_pages * d->wb.page_size, b, sizeof b),
	    size_human(d->wb.limit_pages * d->wb.page_size, l, sizeof l));
	return 0;
}

static int
daemon_create_exports(struct daemon *d, struct backend **backends)
{
	if (daemon_create_cache(d) < 0)
		return -1;
	d->devs = calloc(DAEMON_MAX_DEVS, sizeof *d->devs);
	if (export_table_init(&d->exports) < 0 || !d->devs ||
	    d->cfg.n_exports > EXPORT_TABLE_MAX)
		return -1;
	for (size_t i = 0; i < d->cfg.n_exports; i++) {
		struct backend *b = backends[i];
		if (!b)
			continue;       /* waiting for its remote */
		backends[i] = NULL;     /* the export's, or closed */
		if (daemon_install_export(d, &d->cfg.exports[i], b) < 0)
			return -1;
	}
	return 0;
}

/* Per-device settings for a device no export is on are a likely typo. */
static int
daemon_check_devices(struct daemon *d)
{
	for (size_t i = 0; i < d->cfg.writeback.n_devices; i++) {
		const struct device_conf *dc = &d->cfg.writeback.devices[i];
		size_t j;
		for (j = 0; j < d->n_devs; j++)
			if (strcmp(d->devs[j]->name, dc->device) == 0)
				break;
		if (j == d->n_devs)
			log_warnx("%s:%d: writeback device %s: no export is "
			    "on this device; its settings are unused",
			    d->cfg.path, dc->line, dc->device);
	}
	for (size_t j = 0; j < d->n_devs; j++)
		log_info("writeback device %s: %u..%u workers, min_ratio %u, "
		    "max_ratio %u", d->devs[j]->name,
		    d->cfg.writeback.min_workers, d->cfg.writeback.max_workers,
		    d->devs[j]->min_ratio, d->devs[j]->max_ratio);
	return 0;
}

static int
daemon_start_io_threads(struct daemon *d)
{
	unsigned n = d->cfg.io_threads;
	sigset_t all, old;

	if (n == 0) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		n = cpus > 0 ? (unsigned)cpus : 1;
	}
	if (n > MAX_IO_THREADS)
		n = MAX_IO_THREADS;
	d->io = calloc(n, sizeof *d->io);
	if (!d->io)
		return -1;

	/* Threads inherit a full signal mask: signals go to the main loop. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int r = 0;
	for (unsigned i = 0; i < n; i++) {
		d->io[i] = ioloop_new(d, i);
		if (d->io[i]) {
			d->io[i]->open_conns = &d->n_conns;
			d->io[i]->host.exports = &d->exports;
		}
		if (!d->io[i] || ioloop_start(d->io[i]) < 0) {
			ioloop_free(d->io[i]);
			d->io[i] = NULL;
			r = -1;
			break;
		}
		d->n_io++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}

static void
daemon_stop_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct daemon *d = w->data;

	if (d->stopping)
		return;
	d->stopping = true;
	__atomic_store_n(&d->wb.stopping, 1, __ATOMIC_RELAXED);
	log_info("received %s: finishing requests in flight, then flushing "
	    "and exiting", strsignal(w->signum));
	ev_break(loop, EVBREAK_ALL);
}

static void
daemon_hup_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct daemon *d = w->data;
	char msg[1024];

	log_info("received SIGHUP: rereading %s", d->cfg.path);
	daemon_reload(d, msg, sizeof msg);
}

/* Install the exports whose remote answered.  Never waits on tune_lock:
 * a reload may hold it for a while (connecting to a new remote), and this
 * is the main loop. */
static void
daemon_install_ready(struct daemon *d)
{
	struct pending_ready r;

	if (pthread_mutex_trylock(&d->tune_lock) != 0)
		return;
	while (pending_poll(d->pending, !d->stopping, &r)) {
		if (daemon_install_export(d, &r.ec, r.backend) < 0)
			log_warnx("export \"%s\": cannot be added", r.ec.name);
		r.backend = NULL;       /* the export's, or closed */
		pending_ready_clear(&r);
	}
	pthread_mutex_unlock(&d->tune_lock);
}

/* Every tick: periodic writeback when dirty_writeback_centisecs (which
 * may be tuned at run time) have passed since the last pass. */
static void
daemon_periodic_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct daemon *d = w->data;
	unsigned cs = __atomic_load_n(&d->wb.writeback_cs, __ATOMIC_RELAXED);
	uint64_t now = now_ns();

	daemon_retire_exports(d);
	daemon_install_ready(d);
	if (cs == 0 || now - d->last_periodic_ns < cs * 10000000ull)
		return;
	d->last_periodic_ns = now;
	for (size_t i = 0; i < d->n_devs; i++)
		wb_kick_periodic(d->devs[i]);
}

/* Shutdown writeback of one export, on its device's pool. */
struct drain_job {
	struct job job;
	struct export *e;
	int r;
	pthread_mutex_t *lock;
	pthread_cond_t *cond;
	unsigned *left;                 /* jobs not finished, under lock */
};

/* A device that keeps failing is tried again with back-off for a while. */
static void
drain_job_run(struct job *job)
{
	struct drain_job *dj = (struct drain_job *)job;

	dj->r = -1;
	for (unsigned attempt = 0; attempt < 5 && dj->r < 0; attempt++) {
		if (attempt)
			sleep(1u << (attempt - 1));
		dj->r = export_flush(dj->e, UINT64_MAX, WB_REASON_SHUTDOWN);
	}
}

static void
drain_job_done(struct job *job)
{
	struct drain_job *dj = (struct drain_job *)job;

	pthread_mutex_lock(dj->lock);
	if (--*dj->left == 0)
		pthread_cond_signal(dj->cond);
	pthread_mutex_unlock(dj->lock);
}

/*
 * Write back everything (shutdown): every export on its own device's
 * workers, all devices at once, so a device that fails or is slow holds up
 * no other.  Returns the number of exports left dirty or unflushed.
 */
static int
daemon_drain_all(struct daemon *d)
{
	int left = 0;
	struct cache_stats st;
	char b[32];
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
	unsigned running = 0;
	size_t n = d->exports.n;        /* tune_lock held: no reload adds */
	struct drain_job *jobs = calloc(n ? n : 1, sizeof *jobs);

	if (!jobs)
		fatalx("shutdown: out of memory");
	cache_get_stats(d->cache, &st);
	if (st.dirty_pages + st.writeback_pages)
		log_info("shutdown: writing back %s of dirty data",
		    size_human((st.dirty_pages + st.writeback_pages) *
		    d->wb.page_size, b, sizeof b));
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n; i++) {
		struct export *e = d->exports.v[i];
		if (e->tflags & NBD_FLAG_READ_ONLY)
			continue;
		jobs[i] = (struct drain_job){
			.job = { .run = drain_job_run, .done = drain_job_done },
			.e = e, .lock = &lock, .cond = &cond, .left = &running,
		};
		running++;
		pool_submit(e->dev->pool, &jobs[i].job);
	}
	while (running > 0)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	for (size_t i = 0; i < n; i++) {
		struct export *e = d->exports.v[i];
		if (e->tflags & NBD_FLAG_READ_ONLY)
			continue;
		if (jobs[i].r < 0) {
			uint64_t cached, dirty;
			cache_file_stats(e->cf, &cached, &dirty);
			if (dirty)
				log_warnx("SHUTDOWN WITH DATA NOT WRITTEN BACK: "
				    "export \"%s\" (%s, device %s) still holds "
				    "%s of dirty data that could not be written: "
				    "it is LOST when wbd exits", e->name,
				    e->backend->description, e->dev->name,
				    size_human(dirty * d->wb.page_size, b,
				    sizeof b));
			else
				log_warnx("SHUTDOWN WITHOUT A FINAL FLUSH: export "
				    "\"%s\" (%s, device %s): everything was "
				    "written, but the device's flush failed, so "
				    "it may not be durable", e->name,
				    e->backend->description, e->dev->name);
			left++;
		}
	}
	free(jobs);
	return left;
}

static void
daemon_free(struct daemon *d)
{
	for (unsigned i = 0; i < d->n_io; i++)
		ioloop_free(d->io[i]);
	free(d->io);
	for (size_t i = 0; i < d->n_devs; i++)
		wb_dev_free(d->devs[i]);
	free(d->devs);
	export_table_free(&d->exports);
	cache_free(d->cache);
	config_free(&d->cfg);
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
	struct daemon dstate = { 0 }, *d = &dstate;
	char err[1024];

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

	d->max_conns = DAEMON_MAX_CONNS_DEFAULT;
	d->ctl_fd = -1;
	d->started_ns = now_ns();
	pthread_mutex_init(&d->tune_lock, NULL);
	log_init("wbd", LOG_TO_STDERR, verbosity);
	if (config_load(config_path, &d->cfg, err, sizeof err) < 0) {
		fprintf(stderr, "wbd: %s\n", err);
		return 1;
	}
	/* Reloads reread the file after daemon() has moved to "/". */
	char *abs = realpath(config_path, NULL);
	if (abs) {
		free(d->cfg.path);
		d->cfg.path = abs;
	}
	if (check_only) {
		printf("configuration OK\n");
		config_free(&d->cfg);
		return 0;
	}

	signal(SIGPIPE, SIG_IGN);
	d->loop = ev_default_loop(EVFLAG_AUTO);
	d->pending = pending_new();
	if (!d->loop || !d->pending)
		fatalx("cannot initialise the event loop");

	/* Everything that can fail on bad input, before detaching. */
	struct backend **backends = calloc(d->cfg.n_exports, sizeof *backends);
	if (!backends || daemon_open_backends(d, backends) < 0 ||
	    listeners_open(d) < 0 || ctl_open(d) < 0) {
		listeners_close(d);
		ctl_stop(d);
		for (size_t i = 0; backends && i < d->cfg.n_exports; i++)
			backend_close(backends[i]);
		free(backends);
		pending_stop(d->pending);
		pending_free(d->pending);
		config_free(&d->cfg);
		log_warnx("start-up failed");
		return 1;
	}
	if (!foreground) {
		if (daemon(0, 0) < 0)
			fatalx("cannot detach: %s", strerror(errno));
		log_init("wbd", LOG_TO_SYSLOG, verbosity);
		ev_loop_fork(d->loop);
	}

	if (daemon_create_exports(d, backends) < 0 ||
	    daemon_check_devices(d) < 0 || ctl_start(d) < 0 ||
	    daemon_start_io_threads(d) < 0) {
		log_warnx("start-up failed");
		for (size_t i = 0; i < d->cfg.n_exports; i++)
			backend_close(backends[i]);
		free(backends);
		listeners_close(d);
		ctl_stop(d);
		for (unsigned i = 0; i < d->n_io; i++) {
			ioloop_drain(d->io[i]);
			ioloop_join(d->io[i]);
		}
		pending_stop(d->pending);
		pending_free(d->pending);
		daemon_free(d);
		return 1;
	}
	free(backends);

	ev_signal_init(&d->sig_term, daemon_stop_cb, SIGTERM);
	ev_signal_init(&d->sig_int, daemon_stop_cb, SIGINT);
	ev_signal_init(&d->sig_hup, daemon_hup_cb, SIGHUP);
	d->sig_term.data = d->sig_int.data = d->sig_hup.data = d;
	ev_signal_start(d->loop, &d->sig_term);
	ev_signal_start(d->loop, &d->sig_int);
	ev_signal_start(d->loop, &d->sig_hup);
	d->last_periodic_ns = now_ns();
	ev_timer_init(&d->periodic, daemon_periodic_cb, DAEMON_TICK_S,
	    DAEMON_TICK_S);
	d->periodic.data = d;
	ev_timer_start(d->loop, &d->periodic);
	listeners_start(d);
	log_info("wbd %s ready: %zu export(s), %u I/O thread(s), %zu "
	    "writeback device(s)%s", WBD_VERSION, d->exports.n, d->n_io,
	    d->n_devs, pending_count(d->pending) ? "; some exports wait for their "
	    "remote" : "");

	ev_run(d->loop, 0);

	/* Shutdown: stop accepting, finish what is in flight, flush. */
	listeners_close(d);
	for (unsigned i = 0; i < d->n_io; i++)
		ioloop_drain(d->io[i]);
	for (unsigned i = 0; i < d->n_io; i++)
		ioloop_join(d->io[i]);
	ev_timer_stop(d->loop, &d->periodic);
	/* A reload still running on the control thread ends first, and none
	 * adds an export during the drain. */
	pthread_mutex_lock(&d->tune_lock);
	pending_stop(d->pending);
	int failed = daemon_drain_all(d);
	pthread_mutex_unlock(&d->tune_lock);
	if (failed)
		log_warnx("shutdown: %d export(s) could not be written back "
		    "and flushed", failed);
	else
		log_info("shutdown complete: all dirty data written back and "
		    "flushed");
	ctl_stop(d);
	pending_free(d->pending);
	daemon_free(d);
	ev_loop_destroy(d->loop);
	return failed ? 1 : 0;
}
