/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backend-file.c - backing device: a local regular file or block device.
 *
 * pread/pwrite for data, fdatasync for FLUSH, fallocate (PUNCH_HOLE,
 * ZERO_RANGE) on files and the BLKDISCARD/BLKZEROOUT ioctls on block
 * devices.  The file descriptor is shared by every worker thread; nothing
 * here keeps a file position, so plain I/O needs no lock.
 *
 * With "direct = true;" the descriptor is O_DIRECT, so the backing's data
 * is not cached a second time in the host's page cache.  O_DIRECT wants
 * the buffer address, offset and length of every transfer to be multiples
 * of the device's logical block size (f->align).  Writeback hands over
 * whole cache pages at page-aligned offsets, which go straight through;
 * what is not aligned (a malloc'ed buffer, the export's short last page, a
 * zeroing fallback at arbitrary offsets) goes through an aligned bounce
 * buffer, and a write that covers its first or last block only in part
 * reads that block first (read-modify-write).  rmw_lock keeps every other
 * write off the device between such a read and its write.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <liburing.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "atomics.h"
#include "backend.h"
#include "log.h"

struct backend_file {
	struct backend b;
	int fd;
	bool is_block;
	uint64_t size_bytes;
	char *path;
	/* Cleared at the first EOPNOTSUPP, so later calls go the slow way. */
	_Atomic bool try_punch;
	_Atomic bool try_zero_range;
	/* O_DIRECT: transfers must be multiples of ALIGN (a power of two). */
	bool direct;
	uint32_t align;
	/*
	 * Only with DIRECT: held shared by every write of whole blocks (and by
	 * fallocate and the block ioctls), exclusively by a read-modify-write.
	 * Writer-preferring, so a read-modify-write is not starved by a
	 * stream of whole-page writeback.
	 */
	pthread_rwlock_t rmw_lock;
};

#define BF(b) ((struct backend_file *)(b))

/*
 * Ranges written since the last good fdatasync that writeback keeps, to
 * write again if the next one fails (BACKEND_REDO_AFTER_FAILED_FLUSH).
 * Past this many a new range is merged into the nearest: a superset,
 * written again in full, rather than a list that grows with random
 * writes.  Each run's completion looks through them, so few.
 */
#define BACKEND_FILE_UNSYNCED_RANGES 16

/* writeback.io_engine, set before the first open. */
static enum backend_io_engine bf_engine = BACKEND_IO_AUTO;

static bool bf_uring_usable(void);

void
backend_set_io_engine(enum backend_io_engine e)
{
	bf_engine = e;
	if (e == BACKEND_IO_URING)
		(void)bf_uring_usable(); /* said now, not per file */
}

/* Largest bounce buffer: a longer unaligned transfer goes in pieces. */
#define BF_BOUNCE_MAX_BYTES     (1u << 20)

static bool
bf_is_aligned(const struct backend_file *f, uint64_t v)
{
	return (v & (f->align - 1)) == 0;
}

static void *
bf_bounce_alloc(const struct backend_file *f, size_t len)
{
	void *p;

	/* Page-aligned at least: posix_memalign wants a multiple of a pointer. */
	if (posix_memalign(&p, f->align > 4096 ? f->align : 4096, len) != 0)
		return NULL;
	return p;
}

static void
bf_lock_shared(struct backend_file *f)
{
	if (f->direct)
		pthread_rwlock_rdlock(&f->rmw_lock);
}

static void
bf_unlock(struct backend_file *f)
{
	if (f->direct)
		pthread_rwlock_unlock(&f->rmw_lock);
}

/*
 * Read COUNT bytes at OFF; past the end of a shorter file reads zeroes.
 * With O_DIRECT the caller has aligned BUF, COUNT and OFF.  A direct read
 * returns whole blocks except at the end of the file, so one that stops
 * off a block boundary has reached the end: it is not resumed at an
 * unaligned offset (which O_DIRECT would refuse) but zero-filled.
 */
static int
bf_pread_fd(struct backend_file *f, void *buf, size_t count, uint64_t off)
{
	char *p = buf;

	while (count > 0) {
		ssize_t r = pread(f->fd, p, count, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		off += (uint64_t)r;
		count -= (size_t)r;
		if (r == 0 || (f->direct && !bf_is_aligned(f, (uint64_t)r))) {
			memset(p, 0, count);
			return 0;
		}
	}
	return 0;
}

/* Unaligned, with O_DIRECT: read the blocks around it, copy the middle. */
static int
bf_pread_bounce(struct backend_file *f, void *buf, uint32_t count,
    uint64_t off)
{
	uint64_t mask = f->align - 1;
	uint64_t lo = off & ~mask, hi = (off + count + mask) & ~mask;
	size_t max = BF_BOUNCE_MAX_BYTES > f->align ? BF_BOUNCE_MAX_BYTES :
	    f->align;
	size_t bufsz = hi - lo < max ? (size_t)(hi - lo) : max;
	uint8_t *bb, *out = buf;
	int r = 0;

	if (count == 0)
		return 0;
	if ((bb = bf_bounce_alloc(f, bufsz)) == NULL)
		return -ENOMEM;
	for (uint64_t w = lo; w < hi && r == 0;) {
		size_t n = hi - w < bufsz ? (size_t)(hi - w) : bufsz;
		uint64_t from = w > off ? w : off;
		uint64_t to = w + n < off + count ? w + n : off + count;
		if ((r = bf_pread_fd(f, bb, n, w)) == 0)
			memcpy(out + (from - off), bb + (from - w), to - from);
		w += n;
	}
	free(bb);
	return r;
}

static int
bf_pread(struct backend *b, void *buf, uint32_t count, uint64_t off)
{
	struct backend_file *f = BF(b);

	if (f->direct && !(bf_is_aligned(f, (uintptr_t)buf) &&
	    bf_is_aligned(f, count) && bf_is_aligned(f, off)))
		return bf_pread_bounce(f, buf, count, off);
	return bf_pread_fd(f, buf, count, off);
}

/*
 * FUA is RWF_DSYNC: the kernel writes the range and makes it durable
 * (REQ_FUA to the device, or a cache flush after) without syncing the rest
 * of the file; with O_DIRECT too.  Each pwritev2 call is durable on its
 * own, so a write split by short writes is durable once every piece is.
 * A short direct write ends on a block boundary, so resuming stays aligned.
 */
static int
bf_pwritev_fd(struct backend_file *f, const struct iovec *iov, int iovcnt,
    uint64_t off, int rwf)
{
	struct iovec local[64];

	/* Writes 64 pieces at a time, resuming after short writes. */
	while (iovcnt > 0) {
		int n = iovcnt < 64 ? iovcnt : 64;
		size_t want = 0;
		memcpy(local, iov, n * sizeof *iov);
		for (int i = 0; i < n; i++)
			want += local[i].iov_len;
		struct iovec *v = local;
		int vn = n;
		while (want > 0) {
			ssize_t r = pwritev2(f->fd, v, vn, (off_t)off, rwf);
			if (r < 0) {
				if (errno == EINTR)
					continue;
				return -errno;
			}
			off += (uint64_t)r;
			want -= (size_t)r;
			while (r > 0 && (size_t)r >= v->iov_len) {
				r -= (ssize_t)v->iov_len;
				v++;
				vn--;
			}
			if (r > 0) {
				v->iov_base = (char *)v->iov_base + r;
				v->iov_len -= (size_t)r;
			}
		}
		iov += n;
		iovcnt -= n;
	}
	return 0;
}

/* Copy N bytes, starting SKIP bytes into the gather list, to DST. */
static void
bf_iov_copy(const struct iovec *iov, int iovcnt, uint64_t skip, uint8_t *dst,
    size_t n)
{
	for (int i = 0; i < iovcnt && n > 0; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		size_t k = iov[i].iov_len - (size_t)skip;
		if (k > n)
			k = n;
		memcpy(dst, (const uint8_t *)iov[i].iov_base + skip, k);
		dst += k;
		n -= k;
		skip = 0;
	}
}

/*
 * Unaligned, with O_DIRECT: gather into aligned blocks and write those.
 * A first or last block the write covers only in part is read first and
 * merged (read-modify-write), under rmw_lock held exclusively so that no
 * other write to that block lands between the read and the write.
 *
 * Writeback writes whole cache pages at page-aligned offsets, so with a
 * page size of at least the block size a read-modify-write happens only
 * at the export's tail, when its size is not a multiple of the block
 * size, and for WRITE_ZEROES written as zeroes at unaligned offsets.  A
 * smaller page size makes every page write one, serialised by the lock.
 *
 * At the tail of a regular file the last block reaches past the end of
 * the file: the write extends the file to that block's end, and the file
 * is cut back to its old size (or the end of this write, if that is
 * further) afterwards, as a plain write would have left it.  A crash in
 * between leaves the file up to one block longer, the extra bytes zeroes.
 */
static int
bf_pwritev_bounce(struct backend_file *f, const struct iovec *iov, int iovcnt,
    uint64_t off, int rwf)
{
	uint64_t mask = f->align - 1, len = 0;

	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (len == 0)
		return 0;

	uint64_t end = off + len;
	uint64_t lo = off & ~mask, hi = (end + mask) & ~mask;
	bool rmw = !bf_is_aligned(f, off) || !bf_is_aligned(f, end);
	size_t max = BF_BOUNCE_MAX_BYTES > f->align ? BF_BOUNCE_MAX_BYTES :
	    f->align;
	size_t bufsz = hi - lo < max ? (size_t)(hi - lo) : max;
	uint8_t *bb = bf_bounce_alloc(f, bufsz);
	struct stat st = { 0 };
	int r = 0;

	if (!bb)
		return -ENOMEM;
	if (rmw)
		pthread_rwlock_wrlock(&f->rmw_lock);
	else
		pthread_rwlock_rdlock(&f->rmw_lock);
	if (rmw && !f->is_block && fstat(f->fd, &st) < 0)
		r = -errno;
	for (uint64_t w = lo; w < hi && r == 0;) {
		size_t n = hi - w < bufsz ? (size_t)(hi - w) : bufsz;
		uint64_t from = w > off ? w : off;
		uint64_t to = w + n < end ? w + n : end;
		/* Only the first piece can start, the last end, mid-block. */
		bool head = from > w, tail = to < w + n;
		if (head)
			r = bf_pread_fd(f, bb, f->align, w);
		if (r == 0 && tail && !(head && n == f->align))
			r = bf_pread_fd(f, bb + n - f->align, f->align,
			    w + n - f->align);
		if (r != 0)
			break;
		bf_iov_copy(iov, iovcnt, from - off, bb + (from - w),
		    (size_t)(to - from));
		struct iovec v = { .iov_base = bb, .iov_len = n };
		r = bf_pwritev_fd(f, &v, 1, w, rwf);
		w += n;
	}
	if (r == 0 && rmw && !f->is_block && hi > (uint64_t)st.st_size &&
	    end < hi) {
		off_t keep = (off_t)end > st.st_size ? (off_t)end : st.st_size;
		if (ftruncate(f->fd, keep) < 0)
			r = -errno;
	}
	pthread_rwlock_unlock(&f->rmw_lock);
	free(bb);
	return r;
}

static bool
bf_iov_is_aligned(const struct backend_file *f, const struct iovec *iov,
    int iovcnt, uint64_t off)
{
	if (!bf_is_aligned(f, off))
		return false;
	for (int i = 0; i < iovcnt; i++)
		if (!bf_is_aligned(f, (uintptr_t)iov[i].iov_base) ||
		    !bf_is_aligned(f, iov[i].iov_len))
			return false;
	return true;
}

static int
bf_pwritev(struct backend *b, const struct iovec *iov, int iovcnt,
    uint64_t off, unsigned flags)
{
	int rwf = (flags & BACKEND_WRITE_FUA) ? RWF_DSYNC : 0;
	struct backend_file *f = BF(b);
	int r;

	if (!f->direct)
		return bf_pwritev_fd(f, iov, iovcnt, off, rwf);
	if (!bf_iov_is_aligned(f, iov, iovcnt, off))
		return bf_pwritev_bounce(f, iov, iovcnt, off, rwf);
	bf_lock_shared(f);
	r = bf_pwritev_fd(f, iov, iovcnt, off, rwf);
	bf_unlock(f);
	return r;
}

static int
bf_pwrite(struct backend *b, const void *buf, uint32_t count, uint64_t off,
    unsigned flags)
{
	struct iovec v = { .iov_base = (void *)buf, .iov_len = count };

	return bf_pwritev(b, &v, 1, off, flags);
}

/* --- io_uring ------------------------------------------------------------
 *
 * Writeback's two-step writes (pwrite_start/pwrite_end) through one ring
 * per worker thread, made on first use and closed when the thread exits.
 * pwrite_start only fills a submission entry; the first pwrite_end
 * submits every entry filled so far in one system call and waits, so a
 * writeback window of runs (writeback.c) costs one io_uring_enter, and
 * the kernel works on the runs while the thread copies the next ones.
 * A buffered write the kernel cannot do without blocking goes to its
 * io-wq workers, so the page-cache copies of a window spread over CPUs.
 *
 * O_DIRECT: rmw_lock is held shared from the first write of a file in
 * flight on the thread to the completion of its last (counted in the
 * ring), never taken twice by one thread: a write to another O_DIRECT
 * file while one is held, and an unaligned write, go the synchronous way
 * after the ring's writes have completed.
 */
struct backend_io {
	struct bf_ring *ring;
	struct backend_file *f;
	const char *buf;
	uint32_t left;
	uint64_t off;
	int rwf;
	int res;
	bool done;
	bool locked; /* counted in ring->nlocked */
};

#define BF_RING_ENTRIES 64

struct bf_ring {
	struct io_uring ring;
	unsigned in_flight;          /* started, not completed */
	struct backend_file *locked; /* whose rmw_lock is held shared */
	unsigned nlocked;
};

static pthread_key_t bf_ring_key;
static pthread_once_t bf_ring_once = PTHREAD_ONCE_INIT;

static void
bf_ring_free(void *p)
{
	struct bf_ring *r = p;

	io_uring_queue_exit(&r->ring);
	free(r);
}

static void
bf_ring_key_init(void)
{
	if (pthread_key_create(&bf_ring_key, bf_ring_free) != 0)
		abort();
}

/* WBD_TEST_NO_IO_URING=1 (tests): io_uring_queue_init fails as a kernel
 * without io_uring (or a seccomp filter refusing it) would. */
static int
bf_ring_init(struct io_uring *ring, unsigned entries)
{
	const char *no = getenv("WBD_TEST_NO_IO_URING");

	if (no && strcmp(no, "1") == 0)
		return -ENOSYS;
	return io_uring_queue_init(entries, ring, 0);
}

/* This thread's ring, made on first use; NULL if it cannot be. */
static struct bf_ring *
bf_ring_get(void)
{
	struct bf_ring *r;

	pthread_once(&bf_ring_once, bf_ring_key_init);
	if ((r = pthread_getspecific(bf_ring_key)) != NULL)
		return r;
	if ((r = calloc(1, sizeof *r)) == NULL)
		return NULL;
	if (bf_ring_init(&r->ring, BF_RING_ENTRIES) < 0) {
		free(r);
		return NULL;
	}
	pthread_setspecific(bf_ring_key, r);
	return r;
}

static void
bf_ring_unlock_one(struct bf_ring *r, struct backend_io *io)
{
	if (!io->locked)
		return;
	io->locked = false;
	if (--r->nlocked == 0) {
		pthread_rwlock_unlock(&r->locked->rmw_lock);
		r->locked = NULL;
	}
}

/* Queue IO's remaining bytes (the ring has room: a window is smaller). */
static void
bf_ring_prep(struct bf_ring *r, struct backend_io *io)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);

	if (!sqe) {
		io_uring_submit(&r->ring);
		sqe = io_uring_get_sqe(&r->ring);
	}
	io_uring_prep_write(sqe, io->f->fd, io->buf, io->left, io->off);
	sqe->rw_flags = io->rwf;
	io_uring_sqe_set_data(sqe, io);
}

/* A completion: done, or the rest of a short write queued again. */
static void
bf_ring_complete(struct bf_ring *r, struct backend_io *io, int res)
{
	if (res == -EINTR || res == -EAGAIN ||
	    (res > 0 && (uint32_t)res < io->left)) {
		if (res > 0) {
			io->buf += res;
			io->off += (uint64_t)res;
			io->left -= (uint32_t)res;
		}
		bf_ring_prep(r, io);
		return;
	}
	io->res = res < 0 ? res : (res == 0 ? -EIO : 0);
	io->done = true;
	r->in_flight--;
	bf_ring_unlock_one(r, io);
}

/* Submit what is queued, wait for at least one completion, take them
 * all; false if the ring fails (then the writes are left in flight). */
static bool
bf_ring_wait(struct bf_ring *r)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;
	int e;

	do
		e = io_uring_submit_and_wait(&r->ring, 1);
	while (e == -EINTR);
	if (e < 0 && e != -EBUSY && e != -EAGAIN)
		return false;
	io_uring_for_each_cqe(&r->ring, head, cqe)
	{
		bf_ring_complete(r, io_uring_cqe_get_data(cqe), cqe->res);
		n++;
	}
	io_uring_cq_advance(&r->ring, n);
	return true;
}

/* Every write of the ring completed (and any lock it held let go). */
static void
bf_ring_drain(struct bf_ring *r)
{
	while (r->in_flight > 0)
		if (!bf_ring_wait(r))
			abort(); /* buffers would be freed in flight */
}

static int
bf_uring_start(struct backend *b, const void *buf, uint32_t count, uint64_t off,
    unsigned flags, struct backend_io **iop)
{
	struct backend_file *f = BF(b);
	struct bf_ring *r = bf_ring_get();
	struct backend_io *io;

	*iop = NULL;
	if (r && f->direct) {
		struct iovec v = { .iov_base = (void *)buf, .iov_len = count };
		if (!bf_iov_is_aligned(f, &v, 1, off) ||
		    (r->nlocked > 0 && r->locked != f)) {
			/* Synchronously: bf_pwrite takes a lock, and a thread
			 * never waits for a lock while holding one. */
			bf_ring_drain(r);
			r = NULL;
		}
	}
	if (!r || (io = calloc(1, sizeof *io)) == NULL)
		return bf_pwrite(b, buf, count, off, flags);
	*io = (struct backend_io){ .ring = r,
		.f = f,
		.buf = buf,
		.left = count,
		.off = off };
	io->rwf = (flags & BACKEND_WRITE_FUA) ? RWF_DSYNC : 0;
	if (f->direct) {
		if (r->nlocked++ == 0) {
			pthread_rwlock_rdlock(&f->rmw_lock);
			r->locked = f;
		}
		io->locked = true;
	}
	bf_ring_prep(r, io);
	r->in_flight++;
	*iop = io;
	return 0;
}

static int
bf_uring_end(struct backend *b, struct backend_io *io)
{
	struct bf_ring *r = io->ring;
	int res;

	(void)b;
	while (!io->done)
		if (!bf_ring_wait(r))
			abort(); /* the buffer would be freed in flight */
	res = io->res;
	free(io);
	return res;
}

/* Can this process use io_uring?  Said once, with the reason if not. */
static bool
bf_uring_usable(void)
{
	static _Atomic int usable = -1;
	struct io_uring ring;
	int e, u = load_relaxed(&usable);

	if (u >= 0)
		return u;
	if ((e = bf_ring_init(&ring, 2)) < 0) {
		log_warnx("io_uring is not available (%s): writeback writes "
			  "to files with pwrite",
		    strerror(-e));
		u = 0;
	} else {
		io_uring_queue_exit(&ring);
		u = 1;
	}
	store_relaxed(&usable, u);
	return u;
}

static int
bf_flush(struct backend *b)
{
	if (fdatasync(BF(b)->fd) < 0)
		return -errno;
	return 0;
}

static int
bf_write_zero_buffer(struct backend *b, uint32_t count, uint64_t off)
{
	/* Aligned for O_DIRECT, so whole blocks of it need no bounce. */
	static alignas(4096) const char zeroes[64 << 10];
	struct backend_file *f = BF(b);

	while (count > 0) {
		uint32_t n = count < sizeof zeroes ? count : sizeof zeroes;
		/* An unaligned start: up to the next block alone, so that
		 * only it is read-modify-written, not every piece. */
		if (f->direct && !bf_is_aligned(f, off) &&
		    n > f->align - (off & (f->align - 1)))
			n = f->align - (uint32_t)(off & (f->align - 1));
		int r = bf_pwrite(b, zeroes, n, off, 0);
		if (r < 0)
			return r;
		off += n;
		count -= n;
	}
	return 0;
}

static int
bf_trim(struct backend *b, uint32_t count, uint64_t off)
{
	struct backend_file *f = BF(b);
	int r = 0;

	/* Like a write: not between a read-modify-write's read and write. */
	bf_lock_shared(f);
	if (f->is_block) {
		uint64_t range[2] = { off, count };
		if (ioctl(f->fd, BLKDISCARD, range) < 0 && errno != EOPNOTSUPP)
			r = -errno;
	} else if (!load_relaxed(&f->try_punch)) {
		;       /* TRIM is advisory */
	} else if (fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		       (off_t)off, count) < 0) {
		if (errno == EOPNOTSUPP)
			store_relaxed(&f->try_punch, false);
		else
			r = -errno;
	}
	bf_unlock(f);
	return r;
}

/* Zero in place, without writing zeroes: 0, -EOPNOTSUPP when zeroes must
 * be written instead, or another negative errno. */
static int
bf_zero_in_place(struct backend_file *f, uint32_t count, uint64_t off,
    bool may_trim)
{
	if (f->is_block) {
		uint64_t range[2] = { off, count };
		if (ioctl(f->fd, BLKZEROOUT, range) == 0)
			return 0;
		if (errno != EOPNOTSUPP && errno != EINVAL)
			return -errno;
		return -EOPNOTSUPP;
	}
	if (may_trim && load_relaxed(&f->try_punch)) {
		if (fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		    (off_t)off, count) == 0)
			return 0;
		if (errno != EOPNOTSUPP)
			return -errno;
		store_relaxed(&f->try_punch, false);
	}
	if (load_relaxed(&f->try_zero_range)) {
		if (fallocate(f->fd, FALLOC_FL_ZERO_RANGE, (off_t)off,
		    count) == 0)
			return 0;
		if (errno != EOPNOTSUPP)
			return -errno;
		store_relaxed(&f->try_zero_range, false);
	}
	return -EOPNOTSUPP;
}

static int
bf_zero(struct backend *b, uint32_t count, uint64_t off, bool may_trim,
    bool fast)
{
	struct backend_file *f = BF(b);
	int r;

	/* Like a write: not between a read-modify-write's read and write. */
	bf_lock_shared(f);
	r = bf_zero_in_place(f, count, off, may_trim);
	bf_unlock(f);
	if (r != -EOPNOTSUPP)
		return r;
	return fast ? -ENOTSUP : bf_write_zero_buffer(b, count, off);
}

/*
 * Holes and data of a regular file, by SEEK_DATA and SEEK_HOLE (a
 * filesystem without them reports the whole file as data); past its end,
 * a hole.  A block device is all data.  The descriptor's file position
 * moves, which nothing else uses (all I/O is positioned).
 */
static int
bf_extents(struct backend *b, uint64_t count, uint64_t off,
    struct backend_extent *ext, unsigned max)
{
	struct backend_file *f = BF(b);
	uint64_t end = off + count, pos = off;
	unsigned n = 0;

	if (f->is_block) {
		ext[0] = (struct backend_extent){ .length = count, .flags = 0 };
		return 1;
	}
	while (pos < end && n < max) {
		uint64_t next = end;
		uint32_t flags = 0;
		off_t d = lseek(f->fd, (off_t)pos, SEEK_DATA);
		if (d < 0 && errno != ENXIO) {
			if (n > 0)
				break;
			return -errno;
		}
		if (d < 0 || (uint64_t)d > pos) {
			/* A hole up to the next data, or to the end. */
			flags = BACKEND_EXTENT_HOLE | BACKEND_EXTENT_ZERO;
			if (d >= 0 && (uint64_t)d < end)
				next = (uint64_t)d;
		} else {
			off_t h = lseek(f->fd, (off_t)pos, SEEK_HOLE);
			if (h < 0) {
				if (n > 0)
					break;
				return -errno;
			}
			if ((uint64_t)h < end)
				next = (uint64_t)h;
		}
		if (next <= pos)
			break; /* changed under us: say no more */
		if (n > 0 && ext[n - 1].flags == flags)
			ext[n - 1].length += next - pos;
		else
			ext[n++] =
			    (struct backend_extent){ .length = next - pos,
				    .flags = flags };
		pos = next;
	}
	if (n == 0)
		ext[n++] =
		    (struct backend_extent){ .length = count, .flags = 0 };
	return (int)n;
}

static uint64_t
bf_size(struct backend *b)
{
	return BF(b)->size_bytes;
}

static void
bf_close(struct backend *b)
{
	struct backend_file *f = BF(b);

	if (f->fd >= 0 && close(f->fd) < 0)
		log_warn("%s: close", f->path);
	pthread_rwlock_destroy(&f->rmw_lock);
	free(f->path);
	free(b->description);
	free(f);
}

#define BF_OPS_COMMON                                                          \
	.pread = bf_pread, .pwrite = bf_pwrite, .flush = bf_flush,             \
	.trim = bf_trim, .zero = bf_zero, .extents = bf_extents,               \
	.size = bf_size, .close = bf_close

/* Zero-copy: writeback hands over the pages, gathered by pwritev. */
static const struct backend_ops backend_file_ops_pwritev = {
	.name = "file",
	.pwritev = bf_pwritev,
	BF_OPS_COMMON,
};

/* No pwritev: writeback copies a run into one buffer (backend.c). */
static const struct backend_ops backend_file_ops_pwrite = {
	.name = "file",
	BF_OPS_COMMON,
};

/* Copied likewise, a window of runs in flight through io_uring. */
static const struct backend_ops backend_file_ops_uring = {
	.name = "file",
	.pwrite_start = bf_uring_start,
	.pwrite_end = bf_uring_end,
	BF_OPS_COMMON,
};

/* The write path of writeback.io_engine (AUTO: pwritev; the measurements
 * behind it are in docs/design-writeback.md). */
static void
bf_choose_ops(struct backend_file *f)
{
	enum backend_io_engine e = bf_engine;

	if (e == BACKEND_IO_AUTO)
		e = BACKEND_IO_PWRITEV;
	/* Read-only ones too: every file on a device writes one way (the
	 * writeback window is sized by the first backend's). */
	if (e == BACKEND_IO_URING && !bf_uring_usable())
		e = BACKEND_IO_PWRITE;
	switch (e) {
	case BACKEND_IO_PWRITEV:
		f->b.ops = &backend_file_ops_pwritev;
		break;
	case BACKEND_IO_URING:
		f->b.ops = &backend_file_ops_uring;
		break;
	default:
		f->b.ops = &backend_file_ops_pwrite;
		break;
	}
	f->b.io_engine = backend_io_engine_name(e);
}

/* Size the file: create it sparse, or extend it; never shrink data. */
static int
bf_set_size(struct backend_file *f, const struct stat *st, uint64_t want)
{
	if (want == 0) {
		f->size_bytes = (uint64_t)st->st_size;
		return 0;
	}
	if ((uint64_t)st->st_size < want && ftruncate(f->fd, (off_t)want) < 0) {
		log_warn("%s: cannot extend to %llu bytes", f->path,
		    (unsigned long long)want);
		return -1;
	}
	/* A larger existing file is served up to the configured size. */
	f->size_bytes = want;
	return 0;
}

/*
 * The alignment O_DIRECT needs on F, into *ALIGN, and where it came from
 * into *HOW; -1 after logging if the file cannot do direct I/O.
 *
 * A block device: its logical block size (BLKSSZGET).  A regular file:
 * what the kernel says in statx(STATX_DIOALIGN), the larger of its offset
 * and memory alignments.  A filesystem that does not say (tmpfs, overlay,
 * older kernels): its block size, st_blksize, if that is a power of two
 * from 512 to 4096, else 4096.  That is a multiple of the logical block
 * size of any common device, so it is never too small; and with cache
 * pages of 4 KiB (the default) writeback stays aligned to it.  Probing
 * with reads is no help: a read of a hole is not checked for alignment.
 */
static int
bf_direct_align(struct backend_file *f, const struct stat *st,
    uint32_t *align, const char **how)
{
	struct statx sx;
	int lbs;

	if (f->is_block) {
		if (ioctl(f->fd, BLKSSZGET, &lbs) < 0) {
			log_warn("%s: BLKSSZGET", f->path);
			return -1;
		}
		*align = (uint32_t)lbs;
		*how = "the device's logical block size";
	} else if (statx(f->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
	    (sx.stx_mask & STATX_DIOALIGN)) {
		if (sx.stx_dio_offset_align == 0) {
			/* The kernel would quietly do buffered I/O instead. */
			log_warnx("%s: the filesystem does not support O_DIRECT "
			    "on this file (direct = true)", f->path);
			errno = EINVAL;
			return -1;
		}
		*align = sx.stx_dio_offset_align > sx.stx_dio_mem_align ?
		    sx.stx_dio_offset_align : sx.stx_dio_mem_align;
		*how = "statx DIOALIGN";
	} else if (st->st_blksize >= 512 && st->st_blksize <= 4096 &&
	    (st->st_blksize & (st->st_blksize - 1)) == 0) {
		*align = (uint32_t)st->st_blksize;
		*how = "the filesystem's block size";
	} else {
		*align = 4096;
		*how = "the default";
	}
	if (*align == 0 || (*align & (*align - 1)) != 0) {
		log_warnx("%s: O_DIRECT alignment %u (%s) is not a power of "
		    "two", f->path, *align, *how);
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/*
 * Turn O_DIRECT on.  Set after the open rather than in it, so that one
 * path serves an existing file and one just created, and a filesystem
 * that refuses O_DIRECT (EINVAL, as ramfs) is told from a file that
 * cannot be opened at all.  Never falls back to buffered I/O.
 */
static int
bf_set_direct(struct backend_file *f, const struct stat *st)
{
	const char *how;
	int fl;

	if ((fl = fcntl(f->fd, F_GETFL)) < 0 ||
	    fcntl(f->fd, F_SETFL, fl | O_DIRECT) < 0) {
		if (errno != EINVAL) {
			log_warn("%s: cannot set O_DIRECT", f->path);
			return -1;
		}
		log_warnx("%s: the filesystem does not support O_DIRECT "
		    "(direct = true)", f->path);
		errno = EINVAL;
		return -1;
	}
	if (bf_direct_align(f, st, &f->align, &how) < 0)
		return -1;
	f->direct = true;
	log_info("%s: opened with O_DIRECT, transfers aligned to %u bytes "
	    "(%s)", f->path, f->align, how);
	return 0;
}

/* Why PATH cannot be opened, the cause named: a missing directory is
 * not a missing file.  errno is kept. */
static void
bf_log_open_failed(const char *path)
{
	int err = errno;
	char *dir = strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
	struct stat st;

	if (slash)
		*slash = '\0';
	if (err == ENOENT && slash && slash != dir && stat(dir, &st) < 0 &&
	    errno == ENOENT)
		log_warnx("%s: cannot open or create it: directory %s does "
			  "not exist",
		    path, dir);
	else if (err == ENOENT)
		log_warnx("%s: does not exist (give the export a size to have "
			  "it created)",
		    path);
	else {
		errno = err;
		log_warn("%s: cannot open backing file", path);
	}
	free(dir);
	errno = err;
}

struct backend *
backend_file_open(const char *path, uint64_t size_bytes, bool readonly,
    bool direct)
{
	struct backend_file *f = calloc(1, sizeof *f);
	pthread_rwlockattr_t attr;
	bool created = false;
	struct stat st;

	if (!f)
		return NULL;
	f->fd = -1;
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr,
	    PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&f->rmw_lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	f->path = strdup(path);
	if (!f->path)
		goto fail;

	int flags = (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	f->fd = open(path, flags);
	if (f->fd < 0 && errno == ENOENT && !readonly && size_bytes > 0) {
		f->fd = open(path, flags | O_CREAT | O_EXCL, 0600);
		created = f->fd >= 0;
	}
	if (f->fd < 0) {
		bf_log_open_failed(path);
		goto fail;
	}
	if (fstat(f->fd, &st) < 0) {
		log_warn("%s: fstat", path);
		goto fail;
	}

	if (S_ISBLK(st.st_mode)) {
		uint64_t dev_size;
		f->is_block = true;
		if (ioctl(f->fd, BLKGETSIZE64, &dev_size) < 0) {
			log_warn("%s: BLKGETSIZE64", path);
			goto fail;
		}
		if (size_bytes > dev_size) {
			log_warnx("%s: configured size %llu exceeds the "
			    "device's %llu bytes", path,
			    (unsigned long long)size_bytes,
			    (unsigned long long)dev_size);
			errno = EINVAL;
			goto fail;
		}
		f->size_bytes = size_bytes ? size_bytes : dev_size;
		f->b.dev = st.st_rdev;
		unsigned short rot = 0;
		if (ioctl(f->fd, BLKROTATIONAL, &rot) == 0 && rot)
			f->b.caps |= BACKEND_ROTATIONAL;
	} else if (S_ISREG(st.st_mode)) {
		if (!readonly && bf_set_size(f, &st, size_bytes) < 0)
			goto fail;
		if (readonly)
			f->size_bytes = size_bytes ? size_bytes :
			    (uint64_t)st.st_size;
		/* A file's writeback device is its filesystem's device. */
		f->b.dev = st.st_dev;
	} else {
		log_warnx("%s: not a regular file or block device", path);
		errno = EINVAL;
		goto fail;
	}
	if (direct && bf_set_direct(f, &st) < 0)
		goto fail;

	bf_choose_ops(f);
	f->b.caps |= BACKEND_CAN_TRIM | BACKEND_CAN_ZERO | BACKEND_CAN_FAST_ZERO;
	if (f->direct)
		f->b.caps |= BACKEND_STABLE_PAGES | BACKEND_UNCACHED;
	if (readonly)
		f->b.caps |= BACKEND_READ_ONLY;
	else
		f->b.caps |= BACKEND_REDO_AFTER_FAILED_FLUSH;
	store_relaxed(&f->b.unflushed_max, BACKEND_FILE_UNSYNCED_RANGES);
	store_relaxed(&f->try_punch, true);
	store_relaxed(&f->try_zero_range, true);
	snprintf(f->b.dev_name, sizeof f->b.dev_name, "%u:%u",
	    major(f->b.dev), minor(f->b.dev));
	if (asprintf(&f->b.description, "%s %s%s",
	    f->is_block ? "block device" : "file", path,
	    f->direct ? " (O_DIRECT)" : "") < 0) {
		f->b.description = NULL;
		goto fail;
	}
	return &f->b;

fail:;
	int saved = errno;
	if (f->fd >= 0)
		close(f->fd);
	/* Leave no empty file behind for a start-up that failed. */
	if (created && unlink(path) < 0)
		log_warn("%s: unlink", path);
	pthread_rwlock_destroy(&f->rmw_lock);
	free(f->path);
	free(f);
	errno = saved;
	return NULL;
}
