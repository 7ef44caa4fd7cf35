/*
 * backend-file.c - backing device: a local regular file or block device.
 *
 * pread/pwrite for data, fdatasync for FLUSH, fallocate (PUNCH_HOLE,
 * ZERO_RANGE) on files and the BLKDISCARD/BLKZEROOUT ioctls on block
 * devices.  The file descriptor is shared by every worker thread; nothing
 * here keeps a file position, so no lock is needed.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "backend.h"
#include "log.h"

struct backend_file {
	struct backend b;
	int fd;
	bool is_block;
	uint64_t size_bytes;
	char *path;
	/* Cleared at the first EOPNOTSUPP, so later calls go the slow way. */
	bool try_punch;
	bool try_zero_range;
};

#define BF(b) ((struct backend_file *)(b))

static int
bf_pread(struct backend *b, void *buf, uint32_t count, uint64_t off)
{
	struct backend_file *f = BF(b);
	char *p = buf;

	while (count > 0) {
		ssize_t r = pread(f->fd, p, count, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0) {
			/* Past the end of a shorter file: zeroes. */
			memset(p, 0, count);
			return 0;
		}
		p += r;
		off += r;
		count -= r;
	}
	return 0;
}

static int
bf_pwritev(struct backend *b, const struct iovec *iov, int iovcnt,
    uint64_t off, unsigned flags);

static int
bf_pwrite(struct backend *b, const void *buf, uint32_t count, uint64_t off,
    unsigned flags)
{
	struct iovec v = { .iov_base = (void *)buf, .iov_len = count };

	return bf_pwritev(b, &v, 1, off, flags);
}

/*
 * FUA is RWF_DSYNC: the kernel writes the range and makes it durable
 * (REQ_FUA to the device, or a cache flush after) without syncing the rest
 * of the file.  Each pwritev2 call is durable on its own, so a write split
 * by short writes is durable once every piece is.
 */
static int
bf_pwritev(struct backend *b, const struct iovec *iov, int iovcnt,
    uint64_t off, unsigned flags)
{
	int rwf = (flags & BACKEND_WRITE_FUA) ? RWF_DSYNC : 0;
	struct backend_file *f = BF(b);
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
	static const char zeroes[64 << 10];

	while (count > 0) {
		uint32_t n = count < sizeof zeroes ? count : sizeof zeroes;
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

	if (f->is_block) {
		uint64_t range[2] = { off, count };
		if (ioctl(f->fd, BLKDISCARD, range) < 0)
			return errno == EOPNOTSUPP ? 0 : -errno;
		return 0;
	}
	if (!__atomic_load_n(&f->try_punch, __ATOMIC_RELAXED))
		return 0;       /* TRIM is advisory */
	if (fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	    (off_t)off, count) < 0) {
		if (errno == EOPNOTSUPP) {
			__atomic_store_n(&f->try_punch, false, __ATOMIC_RELAXED);
			return 0;
		}
		return -errno;
	}
	return 0;
}

static int
bf_zero(struct backend *b, uint32_t count, uint64_t off, bool may_trim,
    bool fast)
{
	struct backend_file *f = BF(b);

	if (f->is_block) {
		uint64_t range[2] = { off, count };
		if (ioctl(f->fd, BLKZEROOUT, range) == 0)
			return 0;
		if (errno != EOPNOTSUPP && errno != EINVAL)
			return -errno;
		return fast ? -ENOTSUP : bf_write_zero_buffer(b, count, off);
	}
	if (may_trim && __atomic_load_n(&f->try_punch, __ATOMIC_RELAXED)) {
		if (fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		    (off_t)off, count) == 0)
			return 0;
		if (errno != EOPNOTSUPP)
			return -errno;
		__atomic_store_n(&f->try_punch, false, __ATOMIC_RELAXED);
	}
	if (__atomic_load_n(&f->try_zero_range, __ATOMIC_RELAXED)) {
		if (fallocate(f->fd, FALLOC_FL_ZERO_RANGE, (off_t)off,
		    count) == 0)
			return 0;
		if (errno != EOPNOTSUPP)
			return -errno;
		__atomic_store_n(&f->try_zero_range, false, __ATOMIC_RELAXED);
	}
	return fast ? -ENOTSUP : bf_write_zero_buffer(b, count, off);
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
	free(f->path);
	free(b->description);
	free(f);
}

static const struct backend_ops backend_file_ops = {
	.name = "file",
	.pread = bf_pread,
	.pwrite = bf_pwrite,
	.pwritev = bf_pwritev,
	.flush = bf_flush,
	.trim = bf_trim,
	.zero = bf_zero,
	.size = bf_size,
	.close = bf_close,
};

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

struct backend *
backend_file_open(const char *path, uint64_t size_bytes, bool readonly,
    bool direct)
{
	struct backend_file *f = calloc(1, sizeof *f);
	struct stat st;

	if (!f)
		return NULL;
	f->fd = -1;
	(void)direct;           /* O_DIRECT: not wired yet */
	f->path = strdup(path);
	if (!f->path)
		goto fail;

	int flags = (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	f->fd = open(path, flags);
	if (f->fd < 0 && errno == ENOENT && !readonly && size_bytes > 0)
		f->fd = open(path, flags | O_CREAT | O_EXCL, 0600);
	if (f->fd < 0) {
		log_warn("%s: cannot open backing file", path);
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

	f->b.ops = &backend_file_ops;
	f->b.caps |= BACKEND_CAN_TRIM | BACKEND_CAN_ZERO | BACKEND_CAN_FAST_ZERO;
	if (readonly)
		f->b.caps |= BACKEND_READ_ONLY;
	f->try_punch = f->try_zero_range = true;
	snprintf(f->b.dev_name, sizeof f->b.dev_name, "%u:%u",
	    major(f->b.dev), minor(f->b.dev));
	if (asprintf(&f->b.description, "%s %s",
	    f->is_block ? "block device" : "file", path) < 0) {
		f->b.description = NULL;
		goto fail;
	}
	return &f->b;

fail:;
	int saved = errno;
	if (f->fd >= 0)
		close(f->fd);
	free(f->path);
	free(f);
	errno = saved;
	return NULL;
}
