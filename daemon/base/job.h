/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * job.h - a unit of work handed between threads.
 *
 * A job is run on a worker thread (run) and then completed on the thread
 * that owns it (done), through that owner's post (an I/O thread's
 * mailbox).  A job with no owner is completed on the worker itself.  The
 * job is embedded in the structure that needs the work done; no
 * allocation happens here.
 */
#ifndef WBD_JOB_H
#define WBD_JOB_H

#include <stdbool.h>
#include <stdint.h>

struct job;

/* Where a job is completed: an I/O thread (struct ioloop embeds one). */
struct job_owner {
	/* Queue JOB for JOB->done() on the owner's thread; any thread. */
	void (*post)(struct job_owner *owner, struct job *job);
};

struct job {
	struct job *next;
	void (*run)(struct job *job);           /* on a worker; may be NULL */
	void (*done)(struct job *job);          /* on OWNER's thread */
	/* A worker reads owner and done before run: once run has returned,
	 * the job may already be reused (background and periodic work are
	 * resubmitted as soon as run clears their flag). */
	struct job_owner *owner;
	uint64_t queued_ns;                     /* when it was submitted */
	/* A client waits for it (a read that missed, a FLUSH): the pool adds
	 * a thread at once rather than after its grow delay. */
	bool waited_on;
};

#endif
