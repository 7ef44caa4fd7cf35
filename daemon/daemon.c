/*
 * daemon.c - the daemon-wide tables that I/O threads consult: export lookup
 * for the handshake, and the hand-off of new connections (main thread) to
 * I/O threads.  The export table is read-only after start-up.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "daemon.h"
#include "export.h"
#include "ioloop.h"
#include "log.h"

struct export *
daemon_find_export(struct daemon *d, const char *name)
{
	if (!*name)
		return d->n_exports ? d->exports[0] : NULL;
	for (size_t i = 0; i < d->n_exports; i++)
		if (strcmp(d->exports[i]->name, name) == 0)
			return d->exports[i];
	return NULL;
}

struct export *
daemon_nth_export(struct daemon *d, size_t i)
{
	return i < d->n_exports ? d->exports[i] : NULL;
}

/* Mailbox message carrying a new connection to an I/O thread. */
struct new_conn {
	struct job job;
	int fd;
	char peer[64];
};

static void
new_conn_done(struct job *job)
{
	struct new_conn *nc = (struct new_conn *)job;

	conn_start(job->owner, nc->fd, nc->peer);
	free(nc);
}

void
daemon_dispatch_conn(struct daemon *d, int fd, const char *peer)
{
	struct new_conn *nc;

	if (__atomic_load_n(&d->n_conns, __ATOMIC_RELAXED) >= d->max_conns) {
		log_warnx("%s: refused: already %u connections", peer,
		    d->max_conns);
		close(fd);
		return;
	}
	nc = calloc(1, sizeof *nc);
	if (!nc) {
		log_warnx("%s: out of memory, dropping connection", peer);
		close(fd);
		return;
	}
	nc->fd = fd;
	snprintf(nc->peer, sizeof nc->peer, "%s", peer);
	nc->job.done = new_conn_done;
	nc->job.owner = d->io[d->next_io++ % d->n_io];
	__atomic_add_fetch(&d->n_conns, 1, __ATOMIC_RELAXED);
	ioloop_post(nc->job.owner, &nc->job);
}

void
daemon_conn_closed(struct daemon *d)
{
	__atomic_sub_fetch(&d->n_conns, 1, __ATOMIC_RELAXED);
}
