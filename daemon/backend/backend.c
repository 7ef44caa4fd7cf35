/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backend.c - the door to the backends: the wrappers every caller uses
 * (preconditions asserted, optional operations supplied), and describing a
 * remote backend's connection state.
 *
 * Any thread; the wrappers add no state of their own beyond the caller's
 * struct backend_write.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bufstash.h"

/* Writes a device taking them in two steps keeps in flight per thread. */
#define BACKEND_MAX_IN_FLIGHT   16
/* Reads: the most a read window may grow to (fill.c sizes it to the
 * link, from 64). */
#define BACKEND_MAX_READS_IN_FLIGHT 1024

static const char *const backend_io_engine_names[] = {
	[BACKEND_IO_AUTO] = "auto",
	[BACKEND_IO_PWRITEV] = "pwritev",
	[BACKEND_IO_PWRITE] = "pwrite",
	[BACKEND_IO_URING] = "io_uring",
};

int
backend_io_engine_parse(const char *s)
{
	for (unsigned i = 0; i <
	     sizeof backend_io_engine_names / sizeof backend_io_engine_names[0];
	     i++)
		if (strcmp(s, backend_io_engine_names[i]) == 0)
			return (int)i;
	return -1;
}

const char *
backend_io_engine_name(enum backend_io_engine e)
{
	return backend_io_engine_names[e];
}

const char *
backend_io_engine_used(struct backend *b)
{
	return b->io_engine ? b->io_engine : "";
}

static const char *const backend_uri_schemes[] = {
	"nbd://", "nbds://", "nbd+unix://", "nbds+unix://", NULL
};

bool
backend_is_uri(const char *backing)
{
	for (const char *const *s = backend_uri_schemes; *s; s++)
		if (strncmp(backing, *s, strlen(*s)) == 0)
			return true;
	return false;
}

static void
backend_assert_range(struct backend *b, uint32_t count, uint64_t off)
{
	assert(count > 0);
	assert(off + count >= off && off + count <= b->ops->size(b));
	(void)b, (void)count, (void)off;
}

static void
backend_assert_writable(struct backend *b, unsigned flags)
{
	assert(!(b->caps & BACKEND_READ_ONLY));
	assert((flags & ~(BACKEND_WRITE_FUA | BACKEND_BUF_PRIVATE)) == 0);
	(void)b, (void)flags;
}

uint64_t
backend_size(struct backend *b)
{
	return b->ops->size(b);
}

int
backend_flush(struct backend *b)
{
	backend_assert_writable(b, 0);
	return b->ops->flush(b);
}

int
backend_trim(struct backend *b, uint32_t count, uint64_t off)
{
	backend_assert_writable(b, 0);
	backend_assert_range(b, count, off);
	/* TRIM is advisory: a device that cannot leaves the data.  (A
	 * client may send it unadvertised: not asserted.) */
	return b->ops->trim ? b->ops->trim(b, count, off) : 0;
}

int
backend_zero(struct backend *b, uint32_t count, uint64_t off, bool may_trim,
    bool fast)
{
	backend_assert_writable(b, 0);
	backend_assert_range(b, count, off);
	if (!b->ops->zero)
		return -ENOTSUP;
	return b->ops->zero(b, count, off, may_trim, fast);
}

int
backend_extents(struct backend *b, uint64_t count, uint64_t off,
    struct backend_extent *ext, unsigned max)
{
	assert(max >= 1 && count > 0);
	assert(off + count >= off && off + count <= b->ops->size(b));
	if (!b->ops->extents) {
		ext[0] = (struct backend_extent){ .length = count, .flags = 0 };
		return 1;
	}
	int n = b->ops->extents(b, count, off, ext, max);
	assert(n != 0 && (n < 0 || (unsigned)n <= max));
	return n;
}

bool
backend_get_state(struct backend *b, struct backend_state *st)
{
	memset(st, 0, sizeof *st);
	if (!b->ops->get_state)
		return false;
	b->ops->get_state(b, st);
	return true;
}

void
backend_reconfigure(struct backend *b, const struct remote_conf *rc)
{
	if (b->ops->reconfigure)
		b->ops->reconfigure(b, rc);
}

unsigned
backend_max_in_flight(struct backend *b)
{
	return b->ops->pwrite_start ? BACKEND_MAX_IN_FLIGHT : 1;
}

unsigned
backend_max_reads_in_flight(struct backend *b)
{
	return b->ops->pread_start ? BACKEND_MAX_READS_IN_FLIGHT : 1;
}

void
backend_read_begin(struct backend *b, struct backend_read *rd, void *buf,
    uint32_t count, uint64_t off)
{
	backend_assert_range(b, count, off);
	*rd = (struct backend_read){ .b = b };
	if (b->ops->pread_start)
		rd->r = b->ops->pread_start(b, buf, count, off, &rd->io);
	else
		rd->r = b->ops->pread(b, buf, count, off);
}

bool
backend_read_wait(struct backend_read *rd, int wake_fd)
{
	if (!rd->io)
		return true;
	return rd->b->ops->pread_wait(rd->b, rd->io, wake_fd);
}

int
backend_read_end(struct backend_read *rd)
{
	int r = rd->r;

	if (rd->io)
		r = rd->b->ops->pread_end(rd->b, rd->io);
	rd->io = NULL;
	return r;
}

/*
 * The gather below reads cache pages that a client may be writing at the
 * same moment, on purpose: such a page is dirty again, and the next
 * writeback puts its new version whole (docs/design-writeback.md, "a page
 * written again while its run is being written").  It is the one race wbd
 * means to have, as the kernel's writeback reads a page a process may be
 * writing (without stable pages); ThreadSanitizer is told to look away
 * from it, the way the kernel marks such reads data_race() for KCSAN.
 */
#if defined(__SANITIZE_THREAD__)
#define WBD_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WBD_TSAN 1
#endif
#endif
#ifdef WBD_TSAN
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
#define RACY_READS_BEGIN() AnnotateIgnoreReadsBegin(__FILE__, __LINE__)
#define RACY_READS_END() AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#else
#define RACY_READS_BEGIN() ((void)0)
#define RACY_READS_END() ((void)0)
#endif

/* IOV's COUNT bytes in one page-aligned buffer (an O_DIRECT device takes
 * it as it is); NULL if out of memory. */
static void *
backend_gather(const struct iovec *iov, int iovcnt, uint32_t count, size_t *cap)
{
	void *buf = bufstash_get(count, cap);

	if (!buf)
		return NULL;
	RACY_READS_BEGIN();
	for (int i = 0, done = 0; i < iovcnt && (uint32_t)done < count; i++) {
		uint32_t n = count - (uint32_t)done;
		if (n > iov[i].iov_len)
			n = (uint32_t)iov[i].iov_len;
		memcpy((char *)buf + done, iov[i].iov_base, n);
		done += (int)n;
	}
	RACY_READS_END();
	return buf;
}

void
backend_write_begin(struct backend *b, struct backend_write *w,
    const struct iovec *iov, int iovcnt, uint32_t count, uint64_t off,
    unsigned flags)
{
	const struct backend_ops *ops = b->ops;
	bool private = flags & BACKEND_BUF_PRIVATE;
	const void *buf;

	backend_assert_writable(b, flags);
	backend_assert_range(b, count, off);
	assert(iovcnt > 0 && (!private || iovcnt == 1));
	flags &= ~BACKEND_BUF_PRIVATE;
	*w = (struct backend_write){ .b = b };
	if (!private && ops->pwritev && !ops->pwrite_start &&
	    !(b->caps & BACKEND_STABLE_PAGES)) {
		/* Zero-copy: the pages themselves. */
		w->r = ops->pwritev(b, iov, iovcnt, off, flags);
		return;
	}
	if (private) {
		buf = iov[0].iov_base;
	} else {
		buf = w->bounce =
		    backend_gather(iov, iovcnt, count, &w->bounce_cap);
		if (!buf) {
			w->r = -ENOMEM;
			return;
		}
	}
	if (ops->pwrite_start)
		w->r = ops->pwrite_start(b, buf, count, off, flags, &w->io);
	else
		w->r = ops->pwrite(b, buf, count, off, flags);
}

int
backend_write_end(struct backend_write *w)
{
	int r = w->r;

	if (w->io)
		r = w->b->ops->pwrite_end(w->b, w->io);
	w->io = NULL;
	if (w->bounce)
		bufstash_put(w->bounce, w->bounce_cap);
	w->bounce = NULL;
	return r;
}
