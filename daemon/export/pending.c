/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pending.c - exports waiting for their remote backing device: see
 * pending.h.
 *
 * Each entry owns a copy of its export's settings (a reload frees the
 * configuration it came from) and at most one attempt thread, which runs
 * backing_open() and leaves the result in the entry.  The entries are
 * under pt.lock; lock order: daemon.tune_lock, then pt.lock.  An entry
 * whose attempt is still running when it is dropped (reload, shutdown) is
 * marked cancelled and reaped by the next tick (or joined at shutdown).
 * An export whose remote answered is handed back by pending_poll; the
 * daemon installs it.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "access.h"
#include "atomics.h"
#include "backend.h"
#include "backing.h"
#include "clock.h"
#include "config.h"
#include "export-journal.h"
#include "journal.h"
#include "lock.h"
#include "log.h"
#include "pending.h"

#define PENDING_MAX             1024
#define PENDING_BACKOFF_MIN_MS  100u
#define NS_PER_MS               1000000ull

struct pending_export {
	struct export_conf ec;          /* own copy */
	struct remote_conf rc;
	pthread_t thread;
	bool running;                   /* an attempt thread exists */
	bool cancelled;                 /* dropped; reap once joined */
	_Atomic int done;               /* the attempt has ended */
	struct backend *result;         /* its backend, NULL if it failed */
	unsigned attempts;              /* failed attempts */
	unsigned backoff_ms;
	uint64_t next_try_ns;           /* monotonic */
	uint64_t since_realtime_ns;
};

struct pending_table {
	pthread_mutex_t lock;
	struct pending_export *v[PENDING_MAX];
	size_t n;
};

static uint64_t
realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct pending_table *
pending_new(void)
{
	struct pending_table *pt = calloc(1, sizeof *pt);

	if (pt)
		lock_init(&pt->lock);
	return pt;
}

bool
pending_wanted(const struct export_conf *ec, int err)
{
	return backend_is_uri(ec->backing) && err == ENOTCONN;
}

struct backend *
pending_open_logged(const struct export_conf *ec, const struct remote_conf *rc,
    const char *why)
{
	struct journal_peek pk;
	char state[PATH_MAX];

	if (!ec->journal.path || !backend_is_uri(ec->backing) ||
	    xj_state_path(&ec->journal, state, sizeof state) < 0)
		return NULL;
	int r = journal_peek(ec->journal.path, state, &pk);
	if (r <= 0 || !pk.has_records)
		return NULL;
	/* Another export's log is refused when the export is installed,
	 * with both identities: here it only waits. */
	if (strcmp(pk.name, ec->name) != 0 ||
	    strcmp(pk.backing, ec->backing) != 0 ||
	    (ec->size_bytes && ec->size_bytes != pk.export_size))
		return NULL;
	struct backend *b =
	    backend_nbd_open_unconnected(ec->backing, pk.export_size, why, rc);
	if (b)
		log_warnx("export \"%s\": its remote does not answer, but its "
			  "write log %s holds data: served now from the "
			  "cache, written back once the remote answers",
		    ec->name, ec->journal.path);
	return b;
}

static void
pe_free(struct pending_export *pe)
{
	backend_close(pe->result);
	free(pe->ec.name);
	free(pe->ec.description);
	free(pe->ec.backing);
	free(pe->ec.journal.path);
	free(pe->ec.journal.dir);
	free(pe->ec.journal.state_dir);
	access_list_unref(pe->ec.allow);
	free(pe);
}

int
pending_add(struct pending_table *pt, const struct export_conf *ec,
    const struct remote_conf *rc)
{
	struct pending_export *pe = calloc(1, sizeof *pe);

	if (!pe)
		goto fail;
	pe->ec = *ec;
	pe->ec.name = strdup(ec->name);
	pe->ec.backing = strdup(ec->backing);
	pe->ec.description = ec->description ? strdup(ec->description) : NULL;
	/* Its own copies: a reload's configuration is freed once read. */
	pe->ec.journal.path =
	    ec->journal.path ? strdup(ec->journal.path) : NULL;
	pe->ec.journal.dir = ec->journal.dir ? strdup(ec->journal.dir) : NULL;
	pe->ec.journal.state_dir =
	    ec->journal.state_dir ? strdup(ec->journal.state_dir) : NULL;
	pe->ec.allow = access_list_ref(ec->allow);
	if (!pe->ec.name || !pe->ec.backing ||
	    (ec->description && !pe->ec.description) ||
	    (ec->journal.path && !pe->ec.journal.path) ||
	    (ec->journal.dir && !pe->ec.journal.dir) ||
	    (ec->journal.state_dir && !pe->ec.journal.state_dir))
		goto fail;
	pe->rc = *rc;
	pe->attempts = 1;               /* the one that brought it here */
	pe->backoff_ms = PENDING_BACKOFF_MIN_MS;
	pe->next_try_ns = now_ns() + pe->backoff_ms * NS_PER_MS;
	pe->since_realtime_ns = realtime_ns();
	pthread_mutex_lock(&pt->lock);
	if (pt->n == PENDING_MAX) {
		pthread_mutex_unlock(&pt->lock);
		goto fail;
	}
	pt->v[pt->n++] = pe;
	pthread_mutex_unlock(&pt->lock);
	log_warnx("export \"%s\": its remote %s does not answer; the other "
	    "exports are served meanwhile, and it is added once the remote "
	    "answers (retrying at most every %u ms)", ec->name, ec->backing,
	    rc->reconnect_max_ms);
	return 0;

fail:
	if (pe) {
		pe->result = NULL;
		pe_free(pe);
	}
	return -1;
}

bool
pending_has(struct pending_table *pt, const char *name)
{
	bool found = false;

	pthread_mutex_lock(&pt->lock);
	for (size_t i = 0; i < pt->n; i++)
		found |= !pt->v[i]->cancelled &&
		    strcmp(pt->v[i]->ec.name, name) == 0;
	pthread_mutex_unlock(&pt->lock);
	return found;
}

/*
 * One connection attempt.  Its failure is logged as a warning on the 2nd,
 * 4th, 8th... attempt, at debug level otherwise: the log says the remote
 * is still down without a line every few seconds.
 */
static void *
pe_attempt(void *arg)
{
	struct pending_export *pe = arg;
	unsigned n = pe->attempts + 1;

	log_set_thread_quiet((n & (n - 1)) != 0);
	pe->result = backing_open(&pe->ec, &pe->rc);
	store_release(&pe->done, 1);
	return NULL;
}

/* Remove entry I (pt.lock held); the caller frees it. */
static struct pending_export *
pt_remove_locked(struct pending_table *pt, size_t i)
{
	struct pending_export *pe = pt->v[i];

	lock_assert_held(&pt->lock);
	memmove(&pt->v[i], &pt->v[i + 1], (pt->n - i - 1) * sizeof pt->v[0]);
	pt->n--;
	return pe;
}

bool
pending_poll(struct pending_table *pt, bool start, struct pending_ready *ready)
{
	bool handed = false;

	pthread_mutex_lock(&pt->lock);
	for (size_t i = 0; i < pt->n;) {
		struct pending_export *pe = pt->v[i];

		if (pe->running && load_acquire(&pe->done)) {
			pthread_join(pe->thread, NULL);
			pe->running = false;
			store_relaxed(&pe->done, 0);
			if (pe->cancelled) {
				pe_free(pt_remove_locked(pt, i));
				continue;
			}
			if (!pe->result) {
				pe->attempts++;
				pe->backoff_ms *= 2;
				if (pe->backoff_ms > pe->rc.reconnect_max_ms)
					pe->backoff_ms = pe->rc.reconnect_max_ms;
				pe->next_try_ns = now_ns() +
				    pe->backoff_ms * NS_PER_MS;
			}
		}
		if (!pe->running && pe->result && !pe->cancelled && !handed) {
			/* Answered: handed back, one per call. */
			pt_remove_locked(pt, i);
			log_info("export \"%s\": its remote answered after %u "
			    "failed attempt%s", pe->ec.name, pe->attempts,
			    pe->attempts == 1 ? "" : "s");
			ready->ec = pe->ec;     /* its strings go with it */
			ready->backend = pe->result;
			free(pe);
			handed = true;
			continue;
		}
		if (start && !pe->running && !pe->result && !pe->cancelled &&
		    now_ns() >= pe->next_try_ns) {
			if (pthread_create(&pe->thread, NULL, pe_attempt,
			    pe) == 0)
				pe->running = true;
			else
				log_warn("export \"%s\": cannot start a "
				    "connection attempt", pe->ec.name);
		}
		i++;
	}
	pthread_mutex_unlock(&pt->lock);
	return handed;
}

void
pending_ready_clear(struct pending_ready *ready)
{
	backend_close(ready->backend);
	free(ready->ec.name);
	free(ready->ec.description);
	free(ready->ec.backing);
	free(ready->ec.journal.path);
	free(ready->ec.journal.dir);
	free(ready->ec.journal.state_dir);
	access_list_unref(ready->ec.allow);
	memset(ready, 0, sizeof *ready);
}

void
pending_prune(struct pending_table *pt, const struct export_conf *exports,
    size_t n, const struct remote_conf *rc)
{
	pthread_mutex_lock(&pt->lock);
	for (size_t i = 0; i < pt->n;) {
		struct pending_export *pe = pt->v[i];
		const struct export_conf *ec = NULL;

		for (size_t j = 0; j < n; j++)
			if (strcmp(exports[j].name, pe->ec.name) == 0)
				ec = &exports[j];
		bool keep = ec && strcmp(ec->backing, pe->ec.backing) == 0 &&
		    ec->size_bytes == pe->ec.size_bytes &&
		    ec->readonly == pe->ec.readonly &&
		    ec->direct == pe->ec.direct &&
		    ((!ec->description && !pe->ec.description) ||
		    (ec->description && pe->ec.description &&
		    strcmp(ec->description, pe->ec.description) == 0));
		if (keep || pe->cancelled) {
			if (keep) {
				pe->ec.cache_mode = ec->cache_mode;
				pe->ec.idle_timeout_s = ec->idle_timeout_s;
				pe->ec.idle_timeout_set = ec->idle_timeout_set;
				access_list_unref(pe->ec.allow);
				pe->ec.allow = access_list_ref(ec->allow);
				if (!pe->running)
					pe->rc = *rc;
			}
			i++;
			continue;
		}
		log_info("export \"%s\": no longer waited for (reload)",
		    pe->ec.name);
		if (pe->running) {
			pe->cancelled = true;   /* reaped by pending_poll */
			i++;
		} else {
			pe_free(pt_remove_locked(pt, i));
		}
	}
	pthread_mutex_unlock(&pt->lock);
}

size_t
pending_count(struct pending_table *pt)
{
	size_t n = 0;

	pthread_mutex_lock(&pt->lock);
	for (size_t i = 0; i < pt->n; i++)
		n += !pt->v[i]->cancelled;
	pthread_mutex_unlock(&pt->lock);
	return n;
}

bool
pending_get(struct pending_table *pt, size_t i, struct pending_info *info)
{
	bool ok = false;

	pthread_mutex_lock(&pt->lock);
	for (size_t j = 0; j < pt->n && !ok; j++) {
		struct pending_export *pe = pt->v[j];
		if (pe->cancelled)
			continue;
		if (i-- == 0) {
			snprintf(info->name, sizeof info->name, "%s",
			    pe->ec.name);
			snprintf(info->backing, sizeof info->backing, "%s",
			    pe->ec.backing);
			info->attempts = pe->attempts;
			info->since_realtime_ns = pe->since_realtime_ns;
			ok = true;
		}
	}
	pthread_mutex_unlock(&pt->lock);
	return ok;
}

void
pending_stop(struct pending_table *pt)
{
	pthread_mutex_lock(&pt->lock);
	for (size_t i = 0; i < pt->n; i++) {
		struct pending_export *pe = pt->v[i];
		if (pe->running)
			pthread_join(pe->thread, NULL);
		if (!pe->cancelled)
			log_info("export \"%s\": never added: its remote did "
			    "not answer", pe->ec.name);
		pe_free(pe);
	}
	pt->n = 0;
	pthread_mutex_unlock(&pt->lock);
}

void
pending_free(struct pending_table *pt)
{
	if (!pt)
		return;
	pthread_mutex_destroy(&pt->lock);
	free(pt);
}
