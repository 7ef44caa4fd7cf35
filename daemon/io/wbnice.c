/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * wbnice.c - writeback nobody waits for at a lower CPU priority: see
 * wbnice.h.  Linux keeps a nice value per thread: setpriority(2) with
 * PRIO_PROCESS and 0 changes the calling thread's alone.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "log.h"
#include "wbnice.h"

static pthread_once_t wbnice_once = PTHREAD_ONCE_INIT;
static int wbnice_base;           /* the main thread's nice value */
static bool wbnice_ok;            /* a thread may take its priority back */
static int wbnice_errno;          /* why not */
static atomic_bool wbnice_failed; /* a thread could not, later */
static _Thread_local bool wbnice_raised;

/* In a thread of its own, so that no thread of the daemon is left at a
 * lower priority if taking it back fails. */
static void *
wbnice_try(void *arg)
{
	(void)arg;
	if (wbnice_base >= 19) {
		wbnice_errno = ERANGE;
		return NULL;
	}
	if (setpriority(PRIO_PROCESS, 0, wbnice_base + 1) < 0) {
		wbnice_errno = errno;
		return NULL;
	}
	if (setpriority(PRIO_PROCESS, 0, wbnice_base) < 0) {
		wbnice_errno = errno;
		return NULL;
	}
	wbnice_ok = true;
	return NULL;
}

static void
wbnice_probe(void)
{
	pthread_t t;

	/* The main thread's (its id is the process's) is the daemon's. */
	errno = 0;
	wbnice_base = getpriority(PRIO_PROCESS, (id_t)getpid());
	if (wbnice_base == -1 && errno != 0) {
		wbnice_errno = errno;
		wbnice_base = 0;
		return;
	}
	int r = pthread_create(&t, NULL, wbnice_try, NULL);
	if (r != 0) {
		wbnice_errno = r;
		return;
	}
	pthread_join(t, NULL);
}

bool
wbnice_supported(unsigned nice)
{
	static atomic_bool said;

	pthread_once(&wbnice_once, wbnice_probe);
	if (!wbnice_ok && nice > 0 && !atomic_exchange(&said, true))
		log_warnx("writeback.background_nice = %u is not applied: a "
			  "thread could not take its priority back (%s); it "
			  "needs CAP_SYS_NICE, or RLIMIT_NICE of at least %d "
			  "(LimitNICE=%+d in a systemd unit)",
		    nice, strerror(wbnice_errno), 20 - wbnice_base,
		    wbnice_base);
	return wbnice_ok && !atomic_load(&wbnice_failed);
}

void
wbnice_enter(unsigned nice)
{
	if (nice == 0 || wbnice_raised || !wbnice_supported(nice))
		return;
	int to = wbnice_base + (int)nice;
	if (to > 19)
		to = 19;
	if (setpriority(PRIO_PROCESS, 0, to) == 0)
		wbnice_raised = true;
}

void
wbnice_leave(void)
{
	if (!wbnice_raised)
		return;
	if (setpriority(PRIO_PROCESS, 0, wbnice_base) == 0) {
		wbnice_raised = false;
		return;
	}
	/* Taken away since the look (a prlimit from outside): no thread
	 * raises its nice value again; this one tries at its next job. */
	if (!atomic_exchange(&wbnice_failed, true))
		log_warn(
		    "a writeback worker could not take its priority "
		    "back; writeback.background_nice is no longer applied");
}
