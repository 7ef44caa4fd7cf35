/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bufstash.h - large page-aligned buffers, kept per thread for the next use.
 *
 * A buffer of a request, a read miss or a write run is used for one
 * operation and freed; with several in flight, freeing them in turn
 * scatters malloc's heap so that each new one is fresh memory, faulted in
 * page by page (measured: a third of writeback's CPU through io_uring, and
 * 15% of wbd's CPU in a pass of cold 1 MiB reads).  A thread keeps those
 * it frees (at most BUFSTASH_KEEP of them and BUFSTASH_KEEP_BYTES in all;
 * the largest stay) and hands them out again best fit, never one more than
 * a quarter larger than asked for.  A thread's go when it exits.  All
 * threads together keep at most BUFSTASH_ALL_BYTES, however many there
 * are (I/O threads, and workers that come and go: each new one would
 * fill a stash of its own); one that finds it full keeps nothing more
 * but by giving up a smaller buffer of its own.  Buffers of under a page
 * come from malloc as they are.
 *
 * Buffers of BUFSTASH_MAP_MIN and more are mapped for themselves (mmap,
 * and munmap when not kept), never carved from malloc's arenas: a few
 * megabytes in flight among the small allocations of the same arena left
 * holes that smaller ones then filled in part, and the arena grew by a
 * little after each burst (the soak, tests/integration/test-soak-rss.sh:
 * one of the two arenas went from 35 to 63 MiB mapped and from 13 to
 * 31 MiB resident in ten minutes, malloc's free bytes from 50 to 83 MiB,
 * which malloc_trim could not give back).  Mapped, a buffer's memory
 * goes back to the kernel when it is unmapped, and what the threads keep
 * is the only reuse.
 *
 * That reuse is worth a hundredfold on a virtual machine, where each
 * page fault is a trap to the hypervisor: a fresh 1 MiB buffer, filled,
 * cost 2.5-2.8 ms faulted in page by page, 1.2 ms mapped with its pages
 * made present at once (MAP_POPULATE, as bufs_alloc maps them: every
 * buffer is written whole before it is read), and 27 us kept and used
 * again.  One thread may keep all that all threads may, so that a
 * remote's writeback window of 1 MiB runs (16 to 30 in flight, one
 * worker's) is taken from what it kept: with 16 a thread, a 2 GiB write
 * of 1 MiB blocks across the LAN profile of bench/net mapped 129 new
 * buffers (33,800 page faults in wbd), with 32, 24 (942 faults).
 */
#ifndef WBD_BUFSTASH_H
#define WBD_BUFSTASH_H

#include <stddef.h>
#include <stdint.h>

#define BUFSTASH_KEEP 32
#define BUFSTASH_KEEP_BYTES ((size_t)32 << 20)
#define BUFSTASH_ALL_BYTES ((uint64_t)32 << 20)
#define BUFSTASH_MAP_MIN ((size_t)64 << 10)

/* A buffer of COUNT bytes at least, page-aligned when COUNT >= 4096; its
 * size into *CAP (for bufstash_put).  NULL if out of memory. */
void *bufstash_get(size_t count, size_t *cap);
/* P, as bufstash_get gave it with CAP, back for the next use (or freed). */
void bufstash_put(void *p, size_t cap);
/* How many buffers this thread keeps, and their bytes into *BYTES. */
unsigned bufstash_kept(size_t *bytes);
/* How many buffers all threads keep, and their bytes into *BYTES. */
uint64_t bufstash_kept_all(uint64_t *bytes);
/* How many buffers are mapped now (in use or kept), and their bytes into
 * *BYTES. */
uint64_t bufstash_mapped(uint64_t *bytes);

#endif
