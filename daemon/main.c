/*
 * main.c - wbd's entry point: options, usage, signals, and the order of
 * the daemon's lifecycle (daemon.c): load the configuration, open what can
 * fail on bad input, detach, start, serve, shut down, exit.
 *
 * The main thread runs the default libev loop: listeners, signals and the
 * tick.  See docs/architecture.md.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "ctl.h"
#include "daemon.h"
#include "log.h"
#include "metrics-http.h"
#include "reload.h"

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
main_hup_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct main_signals *s = w->data;
	char msg[1024];

	log_info("received SIGHUP: rereading %s", s->d->cfg.path);
	daemon_reload(s->d, msg, sizeof msg);
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

/* Load the configuration at PATH into *CFG, its path made absolute (a
 * reload rereads it after daemon() has moved to "/").  0, or -1 after
 * printing why. */
static int
main_load_config(const char *path, struct wbd_config *cfg)
{
	char err[1024];

	if (config_load(path, cfg, err, sizeof err) < 0) {
		fprintf(stderr, "wbd: %s\n", err);
		return -1;
	}
	char *abs = realpath(path, NULL);
	if (abs) {
		free(cfg->path);
		cfg->path = abs;
	}
	return 0;
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
		printf("configuration OK\n");
		config_free(&cfg);
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);

	/* Everything that can fail on bad input, before detaching. */
	if (daemon_init(d, &cfg) < 0 || daemon_open(d) < 0 || ctl_open(d) < 0 ||
	    metrics_http_open(d, &mh) < 0) {
		ctl_stop(d);
		daemon_free(d);
		log_warnx("start-up failed");
		return 1;
	}
	if (!foreground) {
		/* Nothing is cached yet: failing here loses nothing. */
		if (daemon(0, 0) < 0)
			fatalx("cannot detach: %s", strerror(errno));
		log_init("wbd", LOG_TO_SYSLOG, verbosity);
	}
	main_signals_start(&sigs, d);
	if (daemon_start(d) < 0 || ctl_start(d) < 0 ||
	    metrics_http_start(mh) < 0) {
		log_warnx("start-up failed");
		daemon_shutdown(d);
		metrics_http_stop(mh);
		ctl_stop(d);
		daemon_free(d);
		return 1;
	}

	daemon_run(d);

	/* Stop accepting, finish what is in flight, write everything back;
	 * the control socket answers until the end. */
	int failed = daemon_shutdown(d);
	metrics_http_stop(mh);
	ctl_stop(d);
	daemon_free(d);
	return failed ? 1 : 0;
}
