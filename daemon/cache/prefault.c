/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * prefault.c - the cache's memory faulted in at start: see prefault.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "atomics.h"
#include "clock.h"
#include "log.h"
#include "prefault.h"
#include "size.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
/* One madvise call: short enough that a stop is seen soon. */
#define PREFAULT_SLICE_BYTES ((size_t)32 << 20)

struct prefault {
	pthread_t thread;
	char *mem;
	size_t bytes;
	_Atomic uint64_t done; /* bytes faulted in */
	_Atomic bool stop;
	bool joined; /* the stopping thread's */
};

static void *
prefault_main(void *arg)
{
	struct prefault *pf = arg;
	uint64_t t0 = now_ns();
	char a[32], b[32];
	size_t at = 0;

	/* The lowest priority: clients' requests come first. */
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), 19) < 0)
		log_debug("prefault: setpriority: %s", strerror(errno));
	while (at < pf->bytes && !load_relaxed(&pf->stop)) {
		size_t n = pf->bytes - at < PREFAULT_SLICE_BYTES ?
		    pf->bytes - at :
		    PREFAULT_SLICE_BYTES;
		if (madvise(pf->mem + at, n, MADV_POPULATE_WRITE) < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			if (errno == EINVAL && at == 0)
				log_info("memory.prefault: this kernel cannot "
					 "(MADV_POPULATE_WRITE is Linux 5.14 "
					 "and later); the cache's memory is "
					 "faulted in as it fills");
			else
				log_warn("memory.prefault: %s of the cache's "
					 "%s faulted in, then",
				    size_human(at, a, sizeof a),
				    size_human(pf->bytes, b, sizeof b));
			return NULL;
		}
		at += n;
		store_relaxed(&pf->done, at);
	}
	if (at == pf->bytes)
		log_info("memory.prefault: the cache's %s faulted in, in "
			 "%.1f s",
		    size_human(pf->bytes, a, sizeof a),
		    (double)(now_ns() - t0) / 1e9);
	else
		log_info("memory.prefault: stopped (shutting down) with %s of "
			 "the cache's %s faulted in",
		    size_human(at, a, sizeof a),
		    size_human(pf->bytes, b, sizeof b));
	return NULL;
}

struct prefault *
prefault_start(void *mem, size_t bytes)
{
	struct prefault *pf = calloc(1, sizeof *pf);
	int r;

	if (!pf) {
		log_warn("memory.prefault");
		return NULL;
	}
	pf->mem = mem;
	pf->bytes = bytes;
	if ((r = pthread_create(&pf->thread, NULL, prefault_main, pf)) != 0) {
		log_warnx("memory.prefault: cannot start a thread: %s",
		    strerror(r));
		free(pf);
		return NULL;
	}
	return pf;
}

uint64_t
prefault_done_bytes(const struct prefault *pf)
{
	return pf ? load_relaxed(&pf->done) : 0;
}

void
prefault_stop(struct prefault *pf)
{
	if (!pf || pf->joined)
		return;
	store_relaxed(&pf->stop, true);
	pthread_join(pf->thread, NULL);
	pf->joined = true;
}

void
prefault_free(struct prefault *pf)
{
	prefault_stop(pf);
	free(pf);
}
