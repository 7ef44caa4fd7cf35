/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * prefault.h - the cache's memory faulted in at start, in the background.
 *
 * The cache is one anonymous mapping, faulted in as pages are first used:
 * the kernel clears each page then, on the thread that fills it.  On the
 * virtual machines measured that first touch was 60% of wbd's CPU in a pass
 * of cold 1 MiB reads (the kernel clearing pages at 0.65 GB/s), paid by the
 * first clients.  memory.prefault moves it to start-up: a thread of the
 * lowest priority asks the kernel to fault the whole mapping in, a slice
 * at a time (MADV_POPULATE_WRITE: the pages are made present and writable,
 * their contents untouched, so the cache may use them meanwhile), and
 * says in the log how long it took.  A host without the memory for the
 * cache says so then, not when the cache is full of dirty data.
 */
#ifndef WBD_PREFAULT_H
#define WBD_PREFAULT_H

#include <stddef.h>
#include <stdint.h>

struct prefault;

/* Start faulting in BYTES at MEM; NULL if the thread could not start (as
 * logged).  The thread ends by itself when done. */
struct prefault *prefault_start(void *mem, size_t bytes);
/* The bytes faulted in so far (0 for NULL). */
uint64_t prefault_done_bytes(const struct prefault *pf);
/* Stop it (between slices) and wait for the thread; PF stays readable
 * (prefault_done_bytes) until prefault_free.  NULL, or twice: no-op. */
void prefault_stop(struct prefault *pf);
/* Stop it if need be, and free PF (NULL: no-op). */
void prefault_free(struct prefault *pf);

#endif
