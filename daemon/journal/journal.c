/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * journal.c - the write log's format, append, replay and reclaim: see
 * journal.h and docs/journal.md.
 *
 * Every number on disk is little-endian.  The superblock slot (4 KiB):
 *
 *	0	magic "WBDLOG01"
 *	8	u32 version, u32 slot size
 *	16	u64 generation (the newer valid slot wins)
 *	24	uuid[16], made at creation
 *	40	u64 log size, u64 export size
 *	56	u64 checkpoint: offset and sequence of the oldest record needed
 *	72	u32 open count, u32 name length, u32 backing length,
 *		u32 flags (1: the records from the checkpoint on were
 *		appended by an ordered log; 0 in logs made before it)
 *	88	name[256], then backing[1024]
 *	4092	u32 CRC-32C of bytes 0..4091
 *
 * A record's header (64 bytes), then its payload, padded to 64 bytes:
 *
 *	0	u32 magic "WBDR", u16 type, u16 flags (1: last of its batch)
 *	8	u64 instance (the uuid's first 8 bytes)
 *	16	u64 sequence, u64 offset in the export
 *	32	u32 length in the export, u32 payload bytes
 *	40	u32 open count, u32 CRC-32C of header (CRC 0) and payload
 *	48	16 bytes of 0
 *
 * The state file (PATH.state beside the log, or the file journal_open's
 * identity names; journal_mark_stale), text:
 *
 *	wbd write log state 1
 *	uuid <the log's uuid, 32 hex digits>
 *	stale_below <a sequence: every record below it is stale>
 *	crc32c <8 hex digits: CRC-32C of the lines above>
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "crc32c.h"
#include "journal.h"

#define J_MAGIC "WBDLOG01"
#define J_VERSION 1u
#define J_REC_MAGIC 0x52444257u /* "WBDR" */
#define J_REC_END 1u            /* flags: the batch's last */
#define J_SB_ORDERED 1u         /* superblock flags: written ordered */
/* The largest payload of one record, and of one batch: more is corrupt. */
#define J_REC_MAX (64u << 20)
#define J_BATCH_MAX (256u << 20)

#define J_SEQ_MAX (UINT64_C(1) << 62)
#define J_OPENS_MAX (UINT32_C(1) << 30)
#define J_SB_CRC_OFF (JOURNAL_SB_SIZE - 4)
#define J_NAME_OFF 88
#define J_BACKING_OFF (J_NAME_OFF + JOURNAL_NAME_MAX + 1)

struct j_batch {
	uint64_t first_seq, last_seq;
	uint64_t off, end; /* in the ring: start, aligned end */
	uint64_t records;
};

struct journal {
	int fd;
	char *path;
	char *state_path;         /* its state file */
	uint64_t file_size, area; /* the file; bytes for records */
	uint8_t uuid[JOURNAL_UUID_LEN];
	uint64_t instance;
	uint32_t opens;
	uint64_t generation; /* of the slot last written */
	char name[JOURNAL_NAME_MAX + 1];
	char backing[JOURNAL_BACKING_MAX + 1];
	uint64_t export_size;
	/* Its records were appended by an ordered log (J_SB_ORDERED). */
	bool ordered;

	uint64_t head_off, head_seq; /* the durable checkpoint */
	uint64_t tail_off, next_seq; /* where the next batch goes */
	uint64_t rel_seq;            /* released: every seq before */
	/* Batches not yet reclaimed, oldest first (a ring of cap). */
	struct j_batch *b;
	size_t b_first, b_n, b_cap;
	uint64_t records; /* in those batches */
	bool replayed, broken;
	uint64_t short_by; /* the file was this much short */
	/* Every record this open may have written has a sequence below
	 * it (an append that failed may have left some on the file). */
	uint64_t written_end;
	/* The state file's: records below it are never replayed. */
	uint64_t stale_below;
};

/* --- little-endian fields ------------------------------------------ */

static void
put16(unsigned char *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof v);
}

static void
put32(unsigned char *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof v);
}

static void
put64(unsigned char *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof v);
}

static uint16_t
get16(const unsigned char *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof v);
	return le16toh(v);
}

static uint32_t
get32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof v);
	return le32toh(v);
}

static uint64_t
get64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof v);
	return le64toh(v);
}

static uint64_t
align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* --- whole reads and writes ---------------------------------------- */

/* Bytes read (fewer at the end of the file), or a negative errno. */
static ssize_t
j_pread(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pread(fd, (char *)buf + done, len - done,
		    (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

static int
j_pwritev(int fd, struct iovec *iov, int n, uint64_t off)
{
	while (n > 0) {
		ssize_t r =
		    pwritev(fd, iov, n < IOV_MAX ? n : IOV_MAX, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO;
		off += (uint64_t)r;
		while (n > 0 && (size_t)r >= iov->iov_len) {
			r -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + r;
			iov->iov_len -= (size_t)r;
		}
	}
	return 0;
}

/* --- the superblock ------------------------------------------------ */

static void
j_sb_encode(const struct journal *j, unsigned char *sb)
{
	memset(sb, 0, JOURNAL_SB_SIZE);
	memcpy(sb, J_MAGIC, 8);
	put32(sb + 8, J_VERSION);
	put32(sb + 12, JOURNAL_SB_SIZE);
	put64(sb + 16, j->generation);
	memcpy(sb + 24, j->uuid, JOURNAL_UUID_LEN);
	put64(sb + 40, j->file_size);
	put64(sb + 48, j->export_size);
	put64(sb + 56, j->head_off);
	put64(sb + 64, j->head_seq);
	put32(sb + 72, j->opens);
	put32(sb + 76, (uint32_t)strlen(j->name));
	put32(sb + 80, (uint32_t)strlen(j->backing));
	put32(sb + 84, j->ordered ? J_SB_ORDERED : 0);
	memcpy(sb + J_NAME_OFF, j->name, strlen(j->name));
	memcpy(sb + J_BACKING_OFF, j->backing, strlen(j->backing));
	put32(sb + J_SB_CRC_OFF, crc32c_update(0, sb, J_SB_CRC_OFF));
}

/* Whether SB is a good slot; if so, J takes what it says. */
static bool
j_sb_decode(struct journal *j, const unsigned char *sb)
{
	if (memcmp(sb, J_MAGIC, 8) != 0 || get32(sb + 8) != J_VERSION ||
	    get32(sb + 12) != JOURNAL_SB_SIZE ||
	    get32(sb + J_SB_CRC_OFF) != crc32c_update(0, sb, J_SB_CRC_OFF))
		return false;
	uint32_t name_len = get32(sb + 76), backing_len = get32(sb + 80);
	if (name_len > JOURNAL_NAME_MAX || backing_len > JOURNAL_BACKING_MAX)
		return false;
	j->generation = get64(sb + 16);
	memcpy(j->uuid, sb + 24, JOURNAL_UUID_LEN);
	j->instance = get64(j->uuid);
	j->file_size = get64(sb + 40);
	j->export_size = get64(sb + 48);
	j->head_off = get64(sb + 56);
	j->head_seq = get64(sb + 64);
	j->opens = get32(sb + 72);
	j->ordered = (get32(sb + 84) & J_SB_ORDERED) != 0;
	/* Sequence numbers start at 1; no counter comes near wrapping. */
	if (j->head_seq == 0 || j->head_seq > J_SEQ_MAX ||
	    j->generation > J_SEQ_MAX || j->opens > J_OPENS_MAX)
		return false;
	memcpy(j->name, sb + J_NAME_OFF, name_len);
	j->name[name_len] = '\0';
	memcpy(j->backing, sb + J_BACKING_OFF, backing_len);
	j->backing[backing_len] = '\0';
	return true;
}

/* Write the next generation into the slot the last one is not in. */
static int
j_sb_write(struct journal *j)
{
	unsigned char sb[JOURNAL_SB_SIZE];
	struct iovec iov = { sb, sizeof sb };

	j->generation++;
	j_sb_encode(j, sb);
	int r = j_pwritev(j->fd, &iov, 1,
	    (j->generation & 1) * (uint64_t)JOURNAL_SB_SIZE);
	if (r == 0 && fdatasync(j->fd) < 0)
		r = -errno;
	if (r < 0)
		j->broken = true;
	return r;
}

/* --- open, create, close ------------------------------------------- */

static struct journal *j_fail(struct journal *j, char *err, size_t errlen,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static struct journal *
j_fail(struct journal *j, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(err, errlen, "journal %s: ", j->path);

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < errlen)
		vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	journal_close(j);
	return NULL;
}

/* The file's or the device's size in bytes, or a negative errno. */
static int64_t
j_dev_size(int fd, bool *is_dev)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	*is_dev = S_ISBLK(st.st_mode);
	if (*is_dev) {
		uint64_t n;
		if (ioctl(fd, BLKGETSIZE64, &n) < 0)
			return -errno;
		return (int64_t)n;
	}
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	return st.st_size;
}

static bool
j_all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * A new log file: write it whole, zeroes, and sync.  Allocated blocks not
 * yet written are "unwritten extents" (ext4, xfs): the first write into
 * each needs the file system's own journal at the next fdatasync, a
 * commit's worth of metadata every time the ring first passes there.
 * Written once now, every later fdatasync syncs data alone.  0 or a
 * negative errno.
 */
static int
j_zero_area(int fd, uint64_t size)
{
	static const uint8_t zero[1u << 16];
	struct iovec iov[16];

	for (unsigned i = 0; i < 16; i++)
		iov[i] = (struct iovec){ (void *)zero, sizeof zero };
	for (uint64_t off = 0; off < size;) {
		uint64_t left = size - off;
		int n = left >= 16 * sizeof zero ?
		    16 :
		    (int)((left + sizeof zero - 1) / sizeof zero);
		struct iovec v[16];
		memcpy(v, iov, sizeof v);
		uint64_t chunk = (uint64_t)n * sizeof zero;
		if (chunk > left) {
			v[n - 1].iov_len -= chunk - left;
			chunk = left;
		}
		int r = j_pwritev(fd, v, n, off);
		if (r < 0)
			return r;
		off += chunk;
	}
	return fdatasync(fd) < 0 ? -errno : 0;
}

static int j_state_name(const char *path, const char *state, char **name);

struct journal *
journal_open(const char *path, uint64_t size, const struct journal_identity *id,
    char *err, size_t errlen)
{
	struct journal *j = calloc(1, sizeof *j);
	unsigned char sb[2][JOURNAL_SB_SIZE];
	bool is_dev = false;

	if (!j || !(j->path = strdup(path)) ||
	    j_state_name(path, id->state_path, &j->state_path) < 0) {
		if (j)
			free(j->path);
		free(j);
		snprintf(err, errlen, "journal %s: out of memory", path);
		return NULL;
	}
	j->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (j->fd < 0)
		return j_fail(j, err, errlen, "cannot open: %s",
		    strerror(errno));
	if (strlen(id->name) > JOURNAL_NAME_MAX ||
	    strlen(id->backing) > JOURNAL_BACKING_MAX)
		return j_fail(j, err, errlen,
		    "the export's name or backing is too long to record");
	int64_t have = j_dev_size(j->fd, &is_dev);
	if (have == -EINVAL)
		return j_fail(j, err, errlen,
		    "not a regular file or a block device");
	if (have < 0)
		return j_fail(j, err, errlen, "cannot tell its size: %s",
		    strerror((int)-have));
	memset(sb, 0, sizeof sb);
	ssize_t got = j_pread(j->fd, sb, sizeof sb, 0);
	if (got < 0)
		return j_fail(j, err, errlen, "cannot read: %s",
		    strerror((int)-got));

	struct journal s0 = { 0 }, s1 = { 0 };
	bool ok0 = j_sb_decode(&s0, sb[0]), ok1 = j_sb_decode(&s1, sb[1]);
	if (ok0 || ok1) {
		const struct journal *s =
		    ok0 && (!ok1 || s0.generation > s1.generation) ? &s0 : &s1;
		if (strcmp(s->name, id->name) != 0 ||
		    strcmp(s->backing, id->backing) != 0 ||
		    s->export_size != id->export_size)
			return j_fail(j, err, errlen,
			    "holds the log of export \"%s\" (%llu bytes, "
			    "backing %s), not of this one (\"%s\", %llu "
			    "bytes, backing %s): refusing to replay it onto "
			    "the wrong device",
			    s->name, (unsigned long long)s->export_size,
			    s->backing, id->name,
			    (unsigned long long)id->export_size, id->backing);
		if (!is_dev && (uint64_t)have < s->file_size) {
			/* Cut short (a copy, a full filesystem): what is
			 * missing reads as zeroes, the end of the log. */
			int r = posix_fallocate(j->fd, 0, (off_t)s->file_size);
			if (r != 0)
				return j_fail(j, err, errlen,
				    "is %llu bytes, shorter than its %llu, and "
				    "cannot be grown back: %s",
				    (unsigned long long)have,
				    (unsigned long long)s->file_size,
				    strerror(r));
			j->short_by = s->file_size - (uint64_t)have;
			have = (int64_t)s->file_size;
		}
		if ((uint64_t)have != s->file_size ||
		    (size && size != s->file_size))
			return j_fail(j, err, errlen,
			    "is %llu bytes, its superblock says %llu%s%s",
			    (unsigned long long)have,
			    (unsigned long long)s->file_size,
			    size && size != s->file_size ?
				", and the configured size differs" :
				"",
			    "; drain the export and remove the log to "
			    "resize it");
		memcpy(j->uuid, s->uuid, sizeof j->uuid);
		j->instance = s->instance;
		j->generation = s->generation;
		j->file_size = s->file_size;
		j->head_off = s->head_off;
		j->head_seq = s->head_seq;
		j->opens = s->opens;
		j->ordered = s->ordered;
	} else {
		if (!j_all_zero(sb[0], sizeof sb))
			return j_fail(j, err, errlen,
			    "holds something that is not a wbd write log; "
			    "refusing to overwrite it (zero its first 8 KiB "
			    "to let wbd make a log there)");
		uint64_t want = size ? size : (uint64_t)have;
		if (is_dev && want > (uint64_t)have)
			return j_fail(j, err, errlen,
			    "the device has %llu bytes, fewer than the %llu "
			    "configured",
			    (unsigned long long)have, (unsigned long long)want);
		want = want / JOURNAL_BATCH_ALIGN * JOURNAL_BATCH_ALIGN;
		if (want < JOURNAL_MIN_SIZE)
			return j_fail(j, err, errlen,
			    "%llu bytes is too small: at least %u",
			    (unsigned long long)want, JOURNAL_MIN_SIZE);
		if (!is_dev) {
			int r = posix_fallocate(j->fd, 0, (off_t)want);
			if (r != 0)
				return j_fail(j, err, errlen,
				    "cannot allocate %llu bytes: %s",
				    (unsigned long long)want, strerror(r));
			if ((uint64_t)have > want &&
			    ftruncate(j->fd, (off_t)want) < 0)
				return j_fail(j, err, errlen,
				    "cannot truncate: %s", strerror(errno));
			if ((r = j_zero_area(j->fd, want)) < 0)
				return j_fail(j, err, errlen,
				    "cannot write its %llu bytes: %s",
				    (unsigned long long)want, strerror(-r));
		}
		if (getrandom(j->uuid, sizeof j->uuid, 0) !=
		    (ssize_t)sizeof j->uuid)
			return j_fail(j, err, errlen, "no random uuid: %s",
			    strerror(errno));
		j->instance = get64(j->uuid);
		j->file_size = want;
		j->head_off = 0;
		j->head_seq = 1;
		j->ordered = id->ordered;
	}
	snprintf(j->name, sizeof j->name, "%s", id->name);
	snprintf(j->backing, sizeof j->backing, "%s", id->backing);
	j->export_size = id->export_size;
	j->area = j->file_size - JOURNAL_AREA_START;
	if (j->head_off >= j->area || j->head_off % JOURNAL_BATCH_ALIGN)
		return j_fail(j, err, errlen,
		    "its checkpoint (offset %llu) is outside its records",
		    (unsigned long long)j->head_off);
	j->tail_off = j->head_off;
	j->next_seq = j->rel_seq = j->head_seq;
	/* Records from now on carry the new open count: none can be taken
	 * for one an earlier run left half-written. */
	j->opens++;
	int r = j_sb_write(j);
	if (r < 0)
		return j_fail(j, err, errlen, "cannot write its superblock: %s",
		    strerror(-r));
	return j;
}

void
journal_close(struct journal *j)
{
	if (!j)
		return;
	if (j->fd >= 0)
		close(j->fd);
	free(j->b);
	free(j->path);
	free(j->state_path);
	free(j);
}

/* --- the batches not yet reclaimed --------------------------------- */

static int
j_batch_push(struct journal *j, const struct j_batch *b)
{
	if (j->b_n == j->b_cap) {
		size_t cap = j->b_cap ? 2 * j->b_cap : 64;
		struct j_batch *nb = malloc(cap * sizeof *nb);
		if (!nb)
			return -ENOMEM;
		for (size_t i = 0; i < j->b_n; i++)
			nb[i] = j->b[(j->b_first + i) % j->b_cap];
		free(j->b);
		j->b = nb;
		j->b_cap = cap;
		j->b_first = 0;
	}
	j->b[(j->b_first + j->b_n++) % j->b_cap] = *b;
	j->records += b->records;
	return 0;
}

/* --- the state file ------------------------------------------------ */

#define J_STATE_HEAD "wbd write log state 1\n"

void
journal_file_name(const char *name, const char *suffix, char *buf, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	char out[JOURNAL_FILE_NAME_CUT + 1 + 16 + 1];
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	size_t n = 0;
	bool cut = false;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		h = (h ^ *p) * 0x100000001b3ull;
		if (cut)
			continue;
		bool keep = (*p >= 'a' && *p <= 'z') ||
		    (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		    *p == '-' || *p == '_' ||
		    (*p == '.' && p != (const unsigned char *)name);
		size_t need = keep ? 1 : 3;
		if (n + need > JOURNAL_FILE_NAME_CUT) {
			cut = true;
			continue;
		}
		if (keep) {
			out[n++] = (char)*p;
		} else {
			out[n++] = '%';
			out[n++] = hex[*p >> 4];
			out[n++] = hex[*p & 15];
		}
	}
	if (cut)
		n += (size_t)snprintf(out + n, sizeof out - n, "~%016llx",
		    (unsigned long long)h);
	out[n] = '\0';
	snprintf(buf, len, "%s%s", out, suffix);
}

/* The state file of the log at PATH: STATE, or PATH.state beside it when
 * STATE is NULL, into *NAME (malloc'd).  0, or -ENOMEM. */
static int
j_state_name(const char *path, const char *state, char **name)
{
	if (state)
		*name = strdup(state);
	else if (asprintf(name, "%s.state", path) < 0)
		*name = NULL;
	return *name ? 0 : -ENOMEM;
}

/* Sync the directory that holds PATH (a rename or unlink in it). */
static int
j_sync_dir(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int n = slash ?
	    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path) :
	    snprintf(dir, sizeof dir, ".");

	if (n < 0 || (size_t)n >= sizeof dir)
		return -ENAMETOOLONG;
	if (n == 0)
		snprintf(dir, sizeof dir, "/");
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	return r;
}

/*
 * Read the state file NAME: 1 with *UUID and *BELOW set, 0 if there is
 * none, -EINVAL if it is damaged (no such text, a bad CRC), or another
 * negative errno (it cannot be read).
 */
static int
j_state_read(const char *name, uint8_t uuid[JOURNAL_UUID_LEN], uint64_t *below)
{
	char buf[256], hex[2 * JOURNAL_UUID_LEN + 1];
	unsigned long long seq;
	unsigned crc;
	int end = 0;

	int fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	ssize_t got = j_pread(fd, buf, sizeof buf - 1, 0);
	close(fd);
	if (got < 0)
		return (int)got;
	buf[got] = '\0';
	char *crc_line = strstr(buf, "crc32c ");
	if (!crc_line || sscanf(crc_line, "crc32c %8x%n", &crc, &end) != 1 ||
	    strcmp(crc_line + end, "\n") != 0 ||
	    crc != crc32c_update(0, buf, (size_t)(crc_line - buf)))
		return -EINVAL;
	*crc_line = '\0';
	end = 0;
	if (strncmp(buf, J_STATE_HEAD, strlen(J_STATE_HEAD)) != 0 ||
	    sscanf(buf + strlen(J_STATE_HEAD),
		"uuid %32[0-9a-f] stale_below %llu%n", hex, &seq, &end) != 2 ||
	    strlen(hex) != 2 * JOURNAL_UUID_LEN ||
	    strcmp(buf + strlen(J_STATE_HEAD) + end, "\n") != 0 || seq == 0 ||
	    seq > J_SEQ_MAX)
		return -EINVAL;
	for (unsigned i = 0; i < JOURNAL_UUID_LEN; i++) {
		unsigned v;
		sscanf(hex + 2 * i, "%2x", &v);
		uuid[i] = (uint8_t)v;
	}
	*below = seq;
	return 1;
}

int
journal_state_peek(const char *state, uint8_t uuid[JOURNAL_UUID_LEN],
    uint64_t *below)
{
	return j_state_read(state, uuid, below);
}

int
journal_mark_stale(struct journal *j)
{
	const char *name = j->state_path;
	char tmp[PATH_MAX + 4], text[256];
	uint64_t below =
	    j->written_end > j->next_seq ? j->written_end : j->next_seq;
	int n, r;

	if (snprintf(tmp, sizeof tmp, "%s.tmp", name) >= (int)sizeof tmp)
		return -ENAMETOOLONG;
	n = snprintf(text, sizeof text, J_STATE_HEAD "uuid ");
	for (unsigned i = 0; i < JOURNAL_UUID_LEN; i++)
		n += snprintf(text + n, sizeof text - (size_t)n, "%02x",
		    j->uuid[i]);
	n += snprintf(text + n, sizeof text - (size_t)n, "\nstale_below %llu\n",
	    (unsigned long long)below);
	n += snprintf(text + n, sizeof text - (size_t)n, "crc32c %08x\n",
	    crc32c_update(0, text, (size_t)n));

	/* Whole or not at all: a file of its own, synced, renamed. */
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	struct iovec iov = { text, (size_t)n };
	r = j_pwritev(fd, &iov, 1, 0);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, name) < 0)
		r = -errno;
	if (r < 0) {
		(void)unlink(tmp);
		return r;
	}
	return j_sync_dir(name);
}

int
journal_state_remove(struct journal *j)
{
	if (unlink(j->state_path) < 0)
		return errno == ENOENT ? 0 : -errno;
	int r = j_sync_dir(j->state_path);
	return r < 0 ? r : 1;
}

int
journal_peek(const char *path, const char *state, struct journal_peek *pk)
{
	unsigned char sb[2][JOURNAL_SB_SIZE], hdr[JOURNAL_REC_HDR];
	struct journal s0 = { 0 }, s1 = { 0 };

	memset(pk, 0, sizeof *pk);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	memset(sb, 0, sizeof sb);
	ssize_t got = j_pread(fd, sb, sizeof sb, 0);
	bool ok0 = got > 0 && j_sb_decode(&s0, sb[0]),
	     ok1 = got > 0 && j_sb_decode(&s1, sb[1]);
	if (got < 0 || !(ok0 || ok1)) {
		close(fd);
		return got < 0 ? (int)got : 0;
	}
	const struct journal *s =
	    ok0 && (!ok1 || s0.generation > s1.generation) ? &s0 : &s1;
	snprintf(pk->name, sizeof pk->name, "%s", s->name);
	snprintf(pk->backing, sizeof pk->backing, "%s", s->backing);
	pk->export_size = s->export_size;
	memcpy(pk->uuid, s->uuid, sizeof pk->uuid);
	/* The record a replay would begin with: this log's, the next
	 * sequence number.  Its batch may still prove torn. */
	if (s->file_size > JOURNAL_AREA_START &&
	    s->head_off + JOURNAL_REC_HDR <=
		s->file_size - JOURNAL_AREA_START) {
		got = j_pread(fd, hdr, sizeof hdr,
		    JOURNAL_AREA_START + s->head_off);
		pk->has_records = got == (ssize_t)sizeof hdr &&
		    get32(hdr) == J_REC_MAGIC &&
		    get64(hdr + 8) == s->instance &&
		    get64(hdr + 16) == s->head_seq;
	}
	close(fd);
	/* Records its state file says are stale are not the log's to give
	 * (a damaged one: the replay says so). */
	uint8_t uuid[JOURNAL_UUID_LEN] = { 0 };
	uint64_t below = 0;
	char *name = NULL;
	if (pk->has_records && j_state_name(path, state, &name) == 0 &&
	    j_state_read(name, uuid, &below) == 1 &&
	    memcmp(uuid, s->uuid, sizeof uuid) == 0 && s->head_seq < below)
		pk->has_records = false;
	free(name);
	return 1;
}

/* --- replay -------------------------------------------------------- */

struct j_hdr {
	uint16_t type, flags;
	uint64_t instance, seq, off;
	uint32_t len, payload, opens, crc;
};

static void
j_hdr_decode(const unsigned char *p, struct j_hdr *h)
{
	h->type = get16(p + 4);
	h->flags = get16(p + 6);
	h->instance = get64(p + 8);
	h->seq = get64(p + 16);
	h->off = get64(p + 24);
	h->len = get32(p + 32);
	h->payload = get32(p + 36);
	h->opens = get32(p + 40);
	h->crc = get32(p + 44);
}

static uint64_t
j_rec_bytes(uint32_t payload)
{
	return align_up(JOURNAL_REC_HDR + (uint64_t)payload, JOURNAL_REC_ALIGN);
}

/* A record's header and payload as read, for the batch being read. */
struct j_pos {
	uint64_t pos;
	struct j_hdr h;
};

/* Hand the batch's records to CB, reading each payload again into BUF
 * (as large as the batch's largest payload). */
static int
j_deliver(struct journal *j, const struct j_pos *recs, size_t n,
    unsigned char *buf, journal_replay_cb *cb, void *arg,
    struct journal_replay_stats *st)
{
	for (size_t i = 0; i < n; i++) {
		const struct j_hdr *h = &recs[i].h;
		struct journal_rec rec = {
			.type = h->type,
			.off = h->off,
			.len = h->len,
			.seq = h->seq,
			.pos =
			    JOURNAL_AREA_START + recs[i].pos + JOURNAL_REC_HDR,
			.last = i == n - 1,
		};
		if (h->type == JOURNAL_REC_WRAP)
			continue;
		if (h->seq < j->stale_below) {
			st->stale_records++;
			continue;
		}
		if (h->payload) {
			ssize_t got = j_pread(j->fd, buf, h->payload,
			    JOURNAL_AREA_START + recs[i].pos + JOURNAL_REC_HDR);
			if (got != (ssize_t)h->payload)
				return got < 0 ? (int)got : -EIO;
			rec.data = buf;
		}
		int r = cb(arg, &rec);
		if (r)
			return r;
	}
	return 0;
}

int
journal_replay(struct journal *j, journal_replay_cb *cb, void *arg,
    struct journal_replay_stats *st)
{
	unsigned char hdr[JOURNAL_REC_HDR];
	unsigned char *buf = NULL;
	size_t buf_cap = 0;
	struct j_pos *recs = NULL;
	size_t n = 0, cap = 0;
	/* Where it starts: CB may checkpoint batches it was given, moving
	 * the head. */
	const uint64_t start = j->head_off;
	uint64_t pos = start, expect = j->head_seq, scanned = 0;
	uint64_t batch_start = pos, batch_bytes = 0;
	uint32_t batch_opens = 0, last_opens = 0;
	uint8_t uuid[JOURNAL_UUID_LEN] = { 0 };
	uint64_t below = 0;
	int r = 0;

	memset(st, 0, sizeof *st);
	st->end_why = "end of log";
	r = j_state_read(j->state_path, uuid, &below);
	if (r < 0) {
		st->end_why = r == -EINVAL ? "its state file is damaged" :
					     "its state file cannot be read";
		st->end_off = JOURNAL_AREA_START + pos;
		return r;
	}
	r = 0;
	if (below && memcmp(uuid, j->uuid, sizeof uuid) == 0)
		j->stale_below = st->stale_below = below;
	for (;;) {
		if (scanned >= j->area) {
			st->end_why = "the whole ring read";
			break;
		}
		if (pos + JOURNAL_REC_HDR > j->area) {
			st->end_why = "end of the ring without a wrap record";
			break;
		}
		ssize_t got =
		    j_pread(j->fd, hdr, sizeof hdr, JOURNAL_AREA_START + pos);
		if (got < 0) {
			r = (int)got;
			st->end_why = "read error";
			break;
		}
		struct j_hdr h;
		j_hdr_decode(hdr, &h);
		if (got != (ssize_t)sizeof hdr || get32(hdr) != J_REC_MAGIC ||
		    h.instance != j->instance || h.seq != expect) {
			st->end_why = n ? "torn batch" : "end of log";
			break;
		}
		bool bad = h.opens >= j->opens || h.opens < last_opens ||
		    (n && h.opens != batch_opens) || h.payload > J_REC_MAX ||
		    pos + j_rec_bytes(h.payload) > j->area ||
		    batch_bytes + j_rec_bytes(h.payload) > J_BATCH_MAX ||
		    !j_all_zero(hdr + 48, 16);
		switch (h.type) {
		case JOURNAL_REC_WRITE:
			bad |= h.payload != h.len;
			break;
		case JOURNAL_REC_ZERO:
		case JOURNAL_REC_TRIM:
			bad |= h.payload != 0;
			break;
		case JOURNAL_REC_WRAP:
			bad |=
			    h.payload != 0 || n != 0 || !(h.flags & J_REC_END);
			break;
		default:
			bad = true;
		}
		if (bad) {
			st->end_why = "bad record header";
			break;
		}
		if (h.payload > buf_cap) {
			unsigned char *nb = realloc(buf, h.payload);
			if (!nb) {
				r = -ENOMEM;
				break;
			}
			buf = nb;
			buf_cap = h.payload;
		}
		if (h.payload) {
			got = j_pread(j->fd, buf, h.payload,
			    JOURNAL_AREA_START + pos + JOURNAL_REC_HDR);
			if (got != (ssize_t)h.payload) {
				r = got < 0 ? (int)got : 0;
				st->end_why =
				    got < 0 ? "read error" : "torn batch";
				break;
			}
		}
		put32(hdr + 44, 0);
		uint32_t crc = crc32c_update(0, hdr, sizeof hdr);
		crc = crc32c_update(crc, buf, h.payload);
		if (crc != h.crc) {
			st->end_why = "bad checksum";
			break;
		}
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 64;
			struct j_pos *nr = realloc(recs, nc * sizeof *nr);
			if (!nr) {
				r = -ENOMEM;
				break;
			}
			recs = nr;
			cap = nc;
		}
		if (n == 0)
			batch_opens = h.opens;
		recs[n++] = (struct j_pos){ pos, h };
		expect++;
		pos += j_rec_bytes(h.payload);
		batch_bytes += j_rec_bytes(h.payload);
		if (!(h.flags & J_REC_END))
			continue;

		/* A whole batch. */
		r = j_deliver(j, recs, n, buf, cb, arg, st);
		if (r)
			break;
		uint64_t end = h.type == JOURNAL_REC_WRAP ?
		    j->area :
		    align_up(pos, JOURNAL_BATCH_ALIGN);
		if (end > j->area)
			end = j->area;
		struct j_batch b = {
			.first_seq = recs[0].h.seq,
			.last_seq = h.seq,
			.off = batch_start,
			.end = end,
			.records = n,
		};
		if ((r = j_batch_push(j, &b)) < 0)
			break;
		/* What was given: stale records were not. */
		if (h.type != JOURNAL_REC_WRAP && h.seq >= j->stale_below) {
			st->batches++;
			for (size_t i = 0; i < n; i++) {
				if (recs[i].h.seq < j->stale_below)
					continue;
				if (!st->first_seq)
					st->first_seq = recs[i].h.seq;
				st->records++;
				st->bytes += recs[i].h.len;
			}
		}
		if (!st->first_seq && h.seq >= j->stale_below)
			st->first_seq = recs[0].h.seq;
		st->last_seq = h.seq;
		scanned += end - batch_start;
		last_opens = batch_opens;
		pos = end == j->area ? 0 : end;
		batch_start = pos;
		batch_bytes = 0;
		n = 0;
		j->tail_off = pos;
		j->next_seq = expect;
		if (pos == start) {
			st->end_why = "the whole ring read";
			break;
		}
	}
	st->end_off = JOURNAL_AREA_START + pos;
	st->dropped_records = n;
	st->short_by = j->short_by;
	if (j->rel_seq < j->head_seq)
		j->rel_seq = j->head_seq;
	j->replayed = true;
	j->written_end = j->next_seq;
	free(buf);
	free(recs);
	if (r == 0 && j->stale_below > j->head_seq) {
		/* Given back before anything is appended, and never used
		 * again: appends go on from the stale sequences' end. */
		if (j->next_seq < j->stale_below)
			j->next_seq = j->written_end = j->stale_below;
		journal_release(j, j->stale_below);
		if ((r = journal_checkpoint(j)) < 0)
			st->end_why = "the checkpoint giving back its stale "
				      "records failed";
	}
	return r;
}

/* --- append -------------------------------------------------------- */

uint64_t
journal_batch_bytes(unsigned n, uint64_t data_bytes)
{
	return align_up((uint64_t)n * (JOURNAL_REC_HDR + JOURNAL_REC_ALIGN) +
		data_bytes,
	    JOURNAL_BATCH_ALIGN);
}

static uint64_t
j_used(const struct journal *j)
{
	if (j->b_n == 0)
		return 0;
	return j->tail_off > j->head_off ? j->tail_off - j->head_off :
					   j->area - j->head_off + j->tail_off;
}

/*
 * Where a batch of BYTES (aligned) goes: at the tail, or at the ring's
 * start after a wrap record at the tail (*WRAP set).  -ENOSPC when it
 * would reach the oldest record still needed; one block always stays
 * free, so that head == tail means empty.
 */
static int
j_place(const struct journal *j, uint64_t bytes, bool *wrap)
{
	uint64_t used = j_used(j);
	uint64_t head = j->b_n ? j->head_off : j->tail_off;

	*wrap = false;
	if (bytes + JOURNAL_BATCH_ALIGN > j->area)
		return -ENOSPC;
	if (j->b_n == 0 || j->tail_off > head) {
		if (bytes <= j->area - j->tail_off)
			return used + bytes + JOURNAL_BATCH_ALIGN <= j->area ?
			    0 :
			    -ENOSPC;
		*wrap = true;
		/* From 0 up to the oldest record needed, which is the wrap
		 * record itself when nothing else is. */
		uint64_t room = j->b_n ? head : j->tail_off;
		return bytes + JOURNAL_BATCH_ALIGN <= room ? 0 : -ENOSPC;
	}
	return j->tail_off + bytes + JOURNAL_BATCH_ALIGN <= head ? 0 : -ENOSPC;
}

bool
journal_fits(const struct journal *j, uint64_t batch_bytes)
{
	bool wrap;

	return !j->broken &&
	    j_place(j, align_up(batch_bytes, JOURNAL_BATCH_ALIGN), &wrap) == 0;
}

static void
j_hdr_encode(unsigned char *p, const struct journal *j,
    const struct journal_rec *rec, uint32_t payload, uint16_t flags)
{
	memset(p, 0, JOURNAL_REC_HDR);
	put32(p, J_REC_MAGIC);
	put16(p + 4, (uint16_t)rec->type);
	put16(p + 6, flags);
	put64(p + 8, j->instance);
	put64(p + 16, rec->seq);
	put64(p + 24, rec->off);
	put32(p + 32, rec->len);
	put32(p + 36, payload);
	put32(p + 40, j->opens);
	uint32_t crc = crc32c_update(0, p, JOURNAL_REC_HDR);
	if (payload)
		crc = crc32c_update(crc, rec->data, payload);
	put32(p + 44, crc);
}

/* The wrap record at the tail, a batch of its own. */
static int
j_append_wrap(struct journal *j)
{
	unsigned char hdr[JOURNAL_REC_HDR];
	struct journal_rec rec = { .type = JOURNAL_REC_WRAP,
		.seq = j->next_seq };
	struct iovec iov = { hdr, sizeof hdr };

	j_hdr_encode(hdr, j, &rec, 0, J_REC_END);
	int r = j_pwritev(j->fd, &iov, 1, JOURNAL_AREA_START + j->tail_off);
	if (r < 0)
		return r;
	struct j_batch b = { .first_seq = rec.seq,
		.last_seq = rec.seq,
		.off = j->tail_off,
		.end = j->area,
		.records = 1 };
	if ((r = j_batch_push(j, &b)) < 0)
		return r;
	j->next_seq++;
	j->tail_off = 0;
	return 0;
}

int
journal_append(struct journal *j, struct journal_rec *recs, unsigned n)
{
	static const unsigned char pad[JOURNAL_REC_ALIGN];
	uint64_t bytes = 0;
	bool wrap;
	int r;

	if (j->broken)
		return -EIO;
	if (n == 0)
		return 0;
	for (unsigned i = 0; i < n; i++) {
		uint32_t payload =
		    recs[i].type == JOURNAL_REC_WRITE ? recs[i].len : 0;
		if (payload > J_REC_MAX)
			return -EINVAL;
		bytes += j_rec_bytes(payload);
	}
	if (bytes > J_BATCH_MAX)
		return -EINVAL;
	if ((r = j_place(j, align_up(bytes, JOURNAL_BATCH_ALIGN), &wrap)) < 0)
		return r;
	/* Whatever happens to the write, no record of it is above this. */
	if (j->next_seq + n + wrap > j->written_end)
		j->written_end = j->next_seq + n + wrap;

	unsigned char *hdrs = malloc((size_t)n * JOURNAL_REC_HDR);
	struct iovec *iov = malloc((size_t)n * 3 * sizeof *iov);
	if (!hdrs || !iov) {
		free(hdrs);
		free(iov);
		return -ENOMEM;
	}
	if (wrap && (r = j_append_wrap(j)) < 0)
		goto out;
	int k = 0;
	uint64_t at = JOURNAL_AREA_START + j->tail_off;
	for (unsigned i = 0; i < n; i++) {
		uint32_t payload =
		    recs[i].type == JOURNAL_REC_WRITE ? recs[i].len : 0;
		unsigned char *h = hdrs + (size_t)i * JOURNAL_REC_HDR;
		recs[i].seq = j->next_seq + i;
		recs[i].pos = at + JOURNAL_REC_HDR;
		at += j_rec_bytes(payload);
		j_hdr_encode(h, j, &recs[i], payload,
		    i == n - 1 ? J_REC_END : 0);
		iov[k++] = (struct iovec){ h, JOURNAL_REC_HDR };
		if (payload) {
			iov[k++] =
			    (struct iovec){ (void *)recs[i].data, payload };
			uint64_t tail =
			    j_rec_bytes(payload) - JOURNAL_REC_HDR - payload;
			if (tail)
				iov[k++] = (struct iovec){ (void *)pad, tail };
		}
	}
	r = j_pwritev(j->fd, iov, k, JOURNAL_AREA_START + j->tail_off);
	if (r == 0) {
		uint64_t end =
		    align_up(j->tail_off + bytes, JOURNAL_BATCH_ALIGN);
		struct j_batch b = { .first_seq = j->next_seq,
			.last_seq = j->next_seq + n - 1,
			.off = j->tail_off,
			.end = end,
			.records = n };
		r = j_batch_push(j, &b);
		j->next_seq += n;
		j->tail_off = end == j->area ? 0 : end;
	}
out:
	if (r < 0)
		j->broken = true;
	free(hdrs);
	free(iov);
	return r;
}

int
journal_read(struct journal *j, uint64_t pos, void *buf, uint32_t len)
{
	ssize_t got = j_pread(j->fd, buf, len, pos);

	if (got < 0)
		return (int)got;
	return got == (ssize_t)len ? 0 : -EIO;
}

int
journal_sync(struct journal *j)
{
	if (j->broken)
		return -EIO;
	if (fdatasync(j->fd) < 0) {
		j->broken = true;
		return -errno;
	}
	return 0;
}

bool
journal_broken(const struct journal *j)
{
	return j->broken;
}

int
journal_invalidate(struct journal *j)
{
	static const uint8_t zero[JOURNAL_AREA_START];
	struct iovec iov = { (void *)zero, sizeof zero };

	/* Both slots in one write: no valid superblock is left either way. */
	int r = j_pwritev(j->fd, &iov, 1, 0);
	if (r == 0 && fdatasync(j->fd) < 0)
		r = -errno;
	/* Writes fail: the file system or the device may still let the
	 * blocks go (a hole reads as zeroes), a change of its metadata. */
	if (r < 0 &&
	    fallocate(j->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
		JOURNAL_AREA_START) == 0 &&
	    fsync(j->fd) == 0)
		r = 0;
	j->broken = true;
	return r;
}

/* --- reclaim ------------------------------------------------------- */

void
journal_release(struct journal *j, uint64_t seq)
{
	if (seq > j->rel_seq)
		j->rel_seq = seq < j->next_seq ? seq : j->next_seq;
}

int
journal_checkpoint(struct journal *j)
{
	size_t drop = 0;
	uint64_t records = 0;

	if (j->broken)
		return -EIO;
	while (drop < j->b_n) {
		const struct j_batch *b = &j->b[(j->b_first + drop) % j->b_cap];
		if (b->last_seq >= j->rel_seq)
			break;
		records += b->records;
		drop++;
	}
	uint64_t old_off = j->head_off, old_seq = j->head_seq;
	if (drop < j->b_n) {
		const struct j_batch *b = &j->b[(j->b_first + drop) % j->b_cap];
		j->head_off = b->off;
		j->head_seq = b->first_seq;
	} else {
		j->head_off = j->tail_off;
		j->head_seq = j->next_seq;
	}
	int r = j_sb_write(j);
	if (r < 0) {
		j->head_off = old_off;
		j->head_seq = old_seq;
		return r;
	}
	/* Durable: the space is the tail's again. */
	if (j->b_cap)
		j->b_first = (j->b_first + drop) % j->b_cap;
	j->b_n -= drop;
	j->records -= records;
	return 0;
}

bool
journal_ordered(const struct journal *j)
{
	return j->ordered;
}

int
journal_set_ordered(struct journal *j, bool ordered)
{
	if (ordered == j->ordered)
		return 0;
	/* Records written unordered are never to be replayed as epochs. */
	if (ordered && (j->b_n > 0 || j->head_seq != j->next_seq))
		return -EBUSY;
	if (j->broken)
		return -EIO;
	j->ordered = ordered;
	int r = j_sb_write(j);
	if (r < 0)
		j->ordered = !ordered;
	return r;
}

void
journal_get_usage(const struct journal *j, struct journal_usage *u)
{
	uint64_t rel = 0;

	for (size_t i = 0; i < j->b_n; i++) {
		const struct j_batch *b = &j->b[(j->b_first + i) % j->b_cap];
		if (b->last_seq >= j->rel_seq)
			break;
		rel += b->end - b->off;
	}
	*u = (struct journal_usage){
		.size = j->area,
		.used = j_used(j),
		.releasable = rel,
		.records = j->records,
		.oldest_seq = j->b_n ? j->b[j->b_first].first_seq : 0,
		.next_seq = j->next_seq,
		.opens = j->opens,
	};
	memcpy(u->uuid, j->uuid, sizeof u->uuid);
}
