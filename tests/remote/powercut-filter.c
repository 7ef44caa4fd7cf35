/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * powercut-filter.c - an nbdkit filter that makes the layer below a device
 * with a volatile write cache that can lose power, for
 * tests/remote/test-remote-journal-power-cut.sh.
 *
 *   gcc -std=c17 -O2 -shared -fPIC $(pkg-config --cflags nbdkit) \
 *       -o powercut.so powercut-filter.c
 *   nbdkit --filter=./powercut.so file log.img cut=/tmp/cut
 *
 * Why: a write log is only as good as its FLUSHes.  A file on a local
 * filesystem keeps every write wbd makes once it is made, whether wbd
 * synced it or not, so killing wbd never shows a missing fdatasync.  Behind
 * this filter (reached through nbdfuse, whose fsync is an NBD FLUSH) the
 * log's device keeps what was written and not yet flushed apart, and
 * forgets it when the power goes.
 *
 * How:
 *   - A write (or a zeroing) is not passed down: it is appended to an
 *     in-memory overlay, a list kept in the order the writes came.
 *   - A read reads the layer below, then applies every overlay entry that
 *     meets it, in order, so the newest write wins as on a real disk.
 *   - A FLUSH applies the overlay, in order, to the layer below, then
 *     flushes it there, and empties the overlay.
 *   - A FUA write goes down at once (written and flushed there) and is
 *     also appended to the overlay, so that reads still see it above any
 *     older overlay entry, and a later FLUSH writing it again is harmless.
 *   - The power cut: once the file named by cut=FILE exists (looked for at
 *     the start of every request, before each entry a FLUSH applies, and
 *     when the client disconnects), the overlay is dropped and every
 *     request fails with EIO from then on, for the life of this nbdkit.
 *     A FLUSH cut half way has put down the entries before the cut, in
 *     order: a device that was writing its cache out when the power went.
 *   - keep=PERCENT (default 0): a device that had written some of its
 *     cache out by itself before the power went.  At the cut, each 4 KiB
 *     piece (4 KiB-aligned on the device) of each overlay entry, oldest
 *     first, is put down with that chance before the rest is dropped: a
 *     batch of the log may then reach the medium in part, with holes.
 *   - cut-at=flush: the cut comes at the worst moment for a log, when a
 *     FLUSH arrives with writes not yet flushed (the log's batch written,
 *     its fdatasync under way): once the cut file exists, the filter goes
 *     on until such a FLUSH and cuts then (failing it), so that the test
 *     can kill wbd right after.  If the client goes first, the cut comes
 *     when it disconnects.  cut-at=request (the default) cuts at the first
 *     request after the file appears.
 *   - At the cut the filter writes FILE.done, a line saying when it cut
 *     and how much of what was not flushed it lost.
 *
 * TRIM and extents are not offered (they would reach the layer below
 * around the overlay); CACHE is a no-op.  Requests are serialised
 * (NBDKIT_THREAD_MODEL_SERIALIZE_REQUESTS): simplicity over speed, and the
 * overlay needs no lock.  Without cut= the filter never cuts.  Each
 * nbdkit is one power-on: the overlay starts empty.
 */
#define _DEFAULT_SOURCE /* random, srandom */

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nbdkit-filter.h>

/* One write not yet flushed; DATA NULL for zeroes. */
struct pc_entry {
	struct pc_entry *next;
	uint64_t off;
	uint32_t len;
	uint8_t *data;
};

static char *cut_file;        /* cut=FILE, or NULL */
static unsigned keep_pct;     /* keep=PERCENT */
static bool at_flush;         /* cut-at=flush */
static bool cut;              /* the power is gone */
static struct pc_entry *head; /* the overlay, oldest first */
static struct pc_entry **tail = &head;
static uint64_t overlay_bytes; /* what the overlay holds, for the log */

static void
pc_drop(void)
{
	struct pc_entry *e, *n;

	for (e = head; e; e = n) {
		n = e->next;
		free(e->data);
		free(e);
	}
	head = NULL;
	tail = &head;
	overlay_bytes = 0;
}

/* pc_keep_some: put down each 4 KiB piece of the overlay with a chance
 * of keep_pct in 100; returns the bytes put down. */
static uint64_t
pc_keep_some(nbdkit_next *next)
{
	const struct pc_entry *e;
	uint64_t kept = 0;
	int err;

	for (e = head; e; e = e->next) {
		uint64_t at = e->off, end = e->off + e->len;
		while (at < end) {
			uint64_t stop = (at / 4096 + 1) * 4096;
			if (stop > end)
				stop = end;
			if ((unsigned)(random() % 100) < keep_pct) {
				uint32_t n = (uint32_t)(stop - at);
				int r = e->data ?
				    next->pwrite(next, e->data + (at - e->off),
					n, at, 0, &err) :
				    next->zero(next, n, at, 0, &err);
				if (r == 0)
					kept += n;
			}
			at = stop;
		}
	}
	return kept;
}

/* Where pc_check_cut is called: a request, a FLUSH, the client's end. */
enum pc_at {
	PC_REQUEST,
	PC_FLUSH,
	PC_END
};

/* pc_check_cut: true (and the overlay dropped, some of it put down with
 * keep=) once the cut file exists and, with cut-at=flush, a FLUSH with
 * writes to flush has come (or the client has gone). */
static bool
pc_check_cut(nbdkit_next *next, enum pc_at at)
{
	if (cut)
		return true;
	if (at_flush && at == PC_REQUEST)
		return false;
	if (at_flush && at == PC_FLUSH && !head)
		return false;
	if (cut_file && access(cut_file, F_OK) == 0) {
		static const char *const where[] = { "a request", "a FLUSH",
			"the client's end" };
		uint64_t kept = keep_pct ? pc_keep_some(next) : 0;
		char done[4096], tmp[4200];
		FILE *f;

		/* Written whole, then renamed: FILE.done appears complete. */
		snprintf(done, sizeof done, "%s.done", cut_file);
		snprintf(tmp, sizeof tmp, "%s.tmp", done);
		if ((f = fopen(tmp, "w")) != NULL) {
			fprintf(f,
			    "cut at %s: %" PRIu64 " of %" PRIu64 " bytes "
			    "not flushed lost\n",
			    where[at], overlay_bytes - kept, overlay_bytes);
			if (fclose(f) == 0)
				rename(tmp, done);
		}
		cut = true;
		pc_drop();
	}
	return cut;
}

static int
pc_config(nbdkit_next_config *next, nbdkit_backend *nxdata, const char *key,
    const char *value)
{
	if (strcmp(key, "cut") == 0) {
		free(cut_file);
		cut_file = nbdkit_absolute_path(value);
		return cut_file ? 0 : -1;
	}
	if (strcmp(key, "cut-at") == 0) {
		if (strcmp(value, "flush") != 0 &&
		    strcmp(value, "request") != 0) {
			nbdkit_error("powercut: cut-at=%s: expected request "
				     "or flush",
			    value);
			return -1;
		}
		at_flush = strcmp(value, "flush") == 0;
		return 0;
	}
	if (strcmp(key, "keep") == 0) {
		char *end;
		unsigned long v = strtoul(value, &end, 10);
		if (end == value || *end || v > 100) {
			nbdkit_error("powercut: keep=%s: expected a percentage "
				     "from 0 to 100",
			    value);
			return -1;
		}
		keep_pct = (unsigned)v;
		return 0;
	}
	return next(nxdata, key, value);
}

#define pc_config_help                                                         \
	"cut=<FILE>          Once FILE exists, forget what was not flushed "   \
	"and fail every request.\n"                                            \
	"keep=<PERCENT>      The chance that each 4 KiB not flushed reaches "  \
	"the medium anyway.\n"                                                 \
	"cut-at=flush        Cut at the first FLUSH with writes to flush."

static void
pc_load(void)
{
	srandom((unsigned)time(NULL) ^ (unsigned)getpid());
}

static void
pc_unload(void)
{
	pc_drop();
	free(cut_file);
}

static int
pc_thread_model(void)
{
	return NBDKIT_THREAD_MODEL_SERIALIZE_REQUESTS;
}

static int
pc_can_trim(nbdkit_next *next __attribute__((unused)),
    void *handle __attribute__((unused)))
{
	return 0;
}

static int
pc_can_extents(nbdkit_next *next __attribute__((unused)),
    void *handle __attribute__((unused)))
{
	return 0;
}

static int
pc_can_fua(nbdkit_next *next __attribute__((unused)),
    void *handle __attribute__((unused)))
{
	return NBDKIT_FUA_NATIVE;
}

static int
pc_can_fast_zero(nbdkit_next *next __attribute__((unused)),
    void *handle __attribute__((unused)))
{
	return 0;
}

static int
pc_can_multi_conn(nbdkit_next *next __attribute__((unused)),
    void *handle __attribute__((unused)))
{
	return 0;
}

static int
pc_can_cache(nbdkit_next *next __attribute__((unused)),
    void *handle __attribute__((unused)))
{
	return NBDKIT_CACHE_EMULATE;
}

/* pc_append: add a write (DATA, or zeroes if NULL) to the overlay. */
static int
pc_append(const void *data, uint32_t count, uint64_t offset, int *err)
{
	struct pc_entry *e = calloc(1, sizeof(*e));

	if (!e || (data && !(e->data = malloc(count ? count : 1)))) {
		free(e);
		*err = ENOMEM;
		return -1;
	}
	if (data)
		memcpy(e->data, data, count);
	e->off = offset;
	e->len = count;
	*tail = e;
	tail = &e->next;
	overlay_bytes += count;
	return 0;
}

static int
pc_pread(nbdkit_next *next, void *handle __attribute__((unused)), void *buf,
    uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
	const struct pc_entry *e;

	if (pc_check_cut(next, PC_REQUEST)) {
		*err = EIO;
		return -1;
	}
	if (next->pread(next, buf, count, offset, flags, err) < 0)
		return -1;
	for (e = head; e; e = e->next) {
		uint64_t lo = e->off > offset ? e->off : offset;
		uint64_t hi = e->off + e->len < offset + count ?
		    e->off + e->len :
		    offset + count;
		if (lo >= hi)
			continue;
		if (e->data)
			memcpy((uint8_t *)buf + (lo - offset),
			    e->data + (lo - e->off), hi - lo);
		else
			memset((uint8_t *)buf + (lo - offset), 0, hi - lo);
	}
	return 0;
}

/* pc_down: write COUNT bytes (DATA, or zeroes) to the layer below. */
static int
pc_down(nbdkit_next *next, const void *data, uint32_t count, uint64_t offset,
    int *err)
{
	if (data)
		return next->pwrite(next, data, count, offset, 0, err);
	return next->zero(next, count, offset, 0, err);
}

/* pc_write: a write or a zeroing, into the overlay; with FUA, down too. */
static int
pc_write(nbdkit_next *next, const void *data, uint32_t count, uint64_t offset,
    uint32_t flags, int *err)
{
	if (pc_check_cut(next, PC_REQUEST)) {
		*err = EIO;
		return -1;
	}
	if (flags & NBDKIT_FLAG_FUA) {
		if (pc_down(next, data, count, offset, err) < 0 ||
		    next->flush(next, 0, err) < 0)
			return -1;
	}
	return pc_append(data, count, offset, err);
}

static int
pc_pwrite(nbdkit_next *next, void *handle __attribute__((unused)),
    const void *buf, uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
	return pc_write(next, buf, count, offset, flags, err);
}

static int
pc_zero(nbdkit_next *next, void *handle __attribute__((unused)), uint32_t count,
    uint64_t offset, uint32_t flags, int *err)
{
	if (flags & NBDKIT_FLAG_FAST_ZERO) {
		*err = ENOTSUP;
		return -1;
	}
	return pc_write(next, NULL, count, offset, flags, err);
}

static int
pc_flush(nbdkit_next *next, void *handle __attribute__((unused)),
    uint32_t flags, int *err)
{
	struct pc_entry *e;

	if (pc_check_cut(next, PC_FLUSH)) {
		*err = EIO;
		return -1;
	}
	/* Oldest first; the power may go between two entries. */
	while ((e = head) != NULL) {
		if (pc_check_cut(next, PC_REQUEST)) {
			*err = EIO;
			return -1;
		}
		if (pc_down(next, e->data, e->len, e->off, err) < 0)
			return -1;
		head = e->next;
		if (!head)
			tail = &head;
		overlay_bytes -= e->len;
		free(e->data);
		free(e);
	}
	return next->flush(next, flags, err);
}

/* The client goes (nbdfuse unmounted): a cut since the last request
 * still puts down its share (keep=). */
static int
pc_finalize(nbdkit_next *next, void *handle __attribute__((unused)))
{
	pc_check_cut(next, PC_END);
	return 0;
}

static struct nbdkit_filter filter = {
	.name = "powercut",
	.longname = "wbd test: a volatile write cache that loses power",
	.config = pc_config,
	.config_help = pc_config_help,
	.load = pc_load,
	.unload = pc_unload,
	.finalize = pc_finalize,
	.thread_model = pc_thread_model,
	.can_trim = pc_can_trim,
	.can_extents = pc_can_extents,
	.can_fua = pc_can_fua,
	.can_fast_zero = pc_can_fast_zero,
	.can_multi_conn = pc_can_multi_conn,
	.can_cache = pc_can_cache,
	.pread = pc_pread,
	.pwrite = pc_pwrite,
	.zero = pc_zero,
	.flush = pc_flush,
};

NBDKIT_REGISTER_FILTER(filter)
