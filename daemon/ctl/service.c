/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * service.c - wbd as a systemd service: READY=1 once it serves, a STATUS=
 * line refreshed every few seconds (exports, connections, dirty data and
 * the age of the oldest), RELOADING=1 ... READY=1 around a reload,
 * STOPPING=1 when shutdown begins (the drain's progress is daemon.c's),
 * and WATCHDOG=1 when the unit sets WatchdogSec=.
 *
 * The watchdog is fed only while wbd's threads answer: every half
 * interval the main thread (whose timer this is) posts a ping to each I/O
 * thread's mailbox and queues one on each device's pool; it sends
 * WATCHDOG=1 only when every ping of the previous round has come back.  A
 * device whose workers are all stuck (a hung disk) therefore stops the
 * pings; a busy one does not, for a ping is a job a client waits for and
 * gets a new worker at once (up to max_workers).
 *
 * Main thread, but service_reload (main or control thread) and the pings'
 * run/done (their threads, which only store a round number).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomics.h"
#include "cache.h"
#include "clock.h"
#include "daemon.h"
#include "export.h"
#include "ioloop.h"
#include "log.h"
#include "notify.h"
#include "pending.h"
#include "pool.h"
#include "reload.h"
#include "service.h"
#include "size.h"
#include "wbdev.h"

#define SERVICE_STATUS_S 5.0

void
service_status_line(struct daemon *d, char *buf, size_t len)
{
	size_t live = 0;
	uint64_t dirty_pages = 0, oldest_ns = 0, now = now_ns();
	unsigned conns = load_relaxed(&d->n_conns);
	size_t waiting = d->pending ? pending_count(d->pending) : 0;
	char dirty[32], age[48] = "", wait[48] = "";

	struct export *e;
	/* The main thread frees exports (the tick), the control thread is a
	 * grace reader: either may look at the table here. */
	export_table_foreach(&d->exports, i, e) {
		uint64_t cached, dirty_e, t;
		if (export_retired(e))
			continue;
		live++;
		cache_file_stats(e->cf, &cached, &dirty_e);
		dirty_pages += dirty_e;
		t = cache_oldest_dirty_ns(e->cf);
		if (t && (!oldest_ns || t < oldest_ns))
			oldest_ns = t;
	}
	if (oldest_ns && now > oldest_ns)
		snprintf(age, sizeof age, ", oldest %.1f s",
		    (double)(now - oldest_ns) / 1e9);
	if (waiting)
		snprintf(wait, sizeof wait, " (%zu waiting for a remote)",
		    waiting);
	snprintf(buf, len, "%zu export(s)%s, %u connection(s), %s dirty%s",
	    live, wait, conns,
	    size_human(dirty_pages * d->wb.page_size, dirty, sizeof dirty),
	    age);
}

static void
service_status_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct service *s = w->data;
	char line[sizeof s->status];

	service_status_line(s->d, line, sizeof line);
	if (strcmp(line, s->status) != 0) {
		memcpy(s->status, line, sizeof line);
		notify_status(line);
	}
}

int
service_reload(struct daemon *d, char *msg, size_t msglen)
{
	char line[256];

	notify_reloading();
	int r = daemon_reload(d, msg, msglen);
	service_status_line(d, line, sizeof line);
	notify_ready(line);
	return r;
}

/* --- the watchdog -------------------------------------------------------- */

/* The answer: on the I/O thread (the job's done, from its mailbox), or on
 * a worker of the device's pool (its run). */
static void
service_pong(struct job *job)
{
	struct service_ping *p = container_of(job, struct service_ping, job);

	store_release(&p->answered, p->sent);
}

static bool
service_ping_back(const struct service_ping *p)
{
	return p->sent == 0 || load_acquire(&p->answered) == p->sent;
}

/*
 * Has every ping of the last round come back?  If not, say once which
 * thread is silent (NAME, of at most 64 bytes) and return false.
 */
static bool
service_all_back(struct service *s, char *name, size_t len)
{
	struct daemon *d = s->d;

	for (unsigned i = 0; i < d->n_io; i++)
		if (!service_ping_back(&s->io_pings[i])) {
			snprintf(name, len, "I/O thread wbd-io-%u", i);
			return false;
		}
	size_t n_devs = daemon_n_devs(d);
	for (size_t i = 0; i < n_devs; i++)
		if (!service_ping_back(&s->dev_pings[i])) {
			snprintf(name, len,
			    "the workers of device %s (flush-%s)",
			    d->devs[i]->name, d->devs[i]->name);
			return false;
		}
	return true;
}

/* Send a new ping wherever the last one came back. */
static void
service_send_pings(struct service *s)
{
	struct daemon *d = s->d;

	s->round++;
	for (unsigned i = 0; i < d->n_io; i++) {
		struct service_ping *p = &s->io_pings[i];
		if (!service_ping_back(p))
			continue;
		p->sent = s->round;
		p->job = (struct job){ .done = service_pong,
			.owner = &d->io[i]->owner };
		ioloop_post(d->io[i], &p->job);
	}
	size_t n_devs = daemon_n_devs(d);
	for (size_t i = 0; i < n_devs; i++) {
		struct service_ping *p = &s->dev_pings[i];
		if (!service_ping_back(p) || !d->devs[i]->pool)
			continue;
		p->sent = s->round;
		p->job = (struct job){ .run = service_pong, .waited_on = true };
		pool_submit(d->devs[i]->pool, &p->job);
	}
}

static void
service_watchdog_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct service *s = w->data;
	char name[96];

	if (service_all_back(s, name, sizeof name)) {
		if (s->stalled)
			log_info("watchdog: every thread answers again");
		s->stalled = false;
		notify_watchdog();
	} else if (!s->stalled) {
		s->stalled = true;
		log_warnx("watchdog: %s did not answer within %.1f s; not "
			  "telling systemd that wbd is alive (WatchdogSec=)",
		    name, (double)s->watchdog_usec / 2e6);
	}
	service_send_pings(s);
}

int
service_start(struct service *s, struct daemon *d)
{
	memset(s, 0, sizeof *s);
	s->d = d;
	s->watchdog_usec = notify_watchdog_usec();
	if (s->watchdog_usec) {
		s->io_pings =
		    calloc(d->n_io ? d->n_io : 1, sizeof *s->io_pings);
		s->dev_pings = calloc(DAEMON_MAX_DEVS, sizeof *s->dev_pings);
		if (!s->io_pings || !s->dev_pings) {
			log_warnx("start-up: out of memory");
			service_free(s);
			return -1;
		}
		double every_s = (double)s->watchdog_usec / 2e6;
		ev_timer_init(&s->watchdog_timer, service_watchdog_cb, 0.0,
		    every_s);
		s->watchdog_timer.data = s;
		ev_timer_start(d->loop, &s->watchdog_timer);
		log_info("watchdog: WATCHDOG=1 every %.1f s while every thread "
			 "answers",
		    every_s);
	}
	service_status_line(d, s->status, sizeof s->status);
	notify_ready(s->status);
	if (notify_enabled()) {
		ev_timer_init(&s->status_timer, service_status_cb,
		    SERVICE_STATUS_S, SERVICE_STATUS_S);
		s->status_timer.data = s;
		ev_timer_start(d->loop, &s->status_timer);
	}
	return 0;
}

void
service_stop(struct service *s)
{
	if (!s->d)
		return;
	ev_timer_stop(s->d->loop, &s->status_timer);
	ev_timer_stop(s->d->loop, &s->watchdog_timer);
	notify_stopping("stopping: finishing the requests in flight");
}

void
service_free(struct service *s)
{
	free(s->io_pings);
	free(s->dev_pings);
	s->io_pings = s->dev_pings = NULL;
	s->d = NULL;
}
