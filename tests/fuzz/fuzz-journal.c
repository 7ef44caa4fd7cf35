/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz-journal.c - the write log's reader on a damaged log: a good log of
 * a few batches (one wrapped) is made, then the input damages it: byte 0
 * holds flags (1: make each record's CRC good again after the damage, so
 * that the checks behind the CRC are reached; 2: the same for both
 * superblock slots), then each 4 bytes are a patch: a 24-bit offset into
 * the file's first 96 KiB and the byte to put there.  Flag 4 writes a
 * state file beside the log (PATH.state) naming the log's uuid and a
 * sequence below which records are stale: 1 + 4 * (byte 0 >> 3).
 *
 * Beyond not crashing or leaking: an open that fails says why; a replay
 * gives records in rising sequence, each whole (a write's data there, its
 * length its payload's); and whatever the damage, the log takes a new
 * batch afterwards that the next open replays as its last -- unless the
 * superblock was forged (flag 2): a superblock with a good CRC that sets
 * the open count back can join old records to new ones, which no torn or
 * flipped write can do.  With a state file, no record below its sequence
 * is given, and the new batch is still the next open's last.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "fuzz.h"
#include "journal.h"

#define SPAN (96u << 10)

static char fuzz_dir[64];
static char fuzz_path[128];
static char fuzz_state[136];     /* PATH.state */
static unsigned char base[SPAN]; /* the good log's first SPAN bytes */
static uint64_t base_size;

static const struct journal_identity fuzz_id = {
	.name = "fz",
	.export_size = 1 << 30,
	.backing = "/dev/fz",
};

static void
fuzz_cleanup(void)
{
	unlink(fuzz_path);
	unlink(fuzz_state);
	rmdir(fuzz_dir);
}

static int
nothing(void *arg, const struct journal_rec *rec)
{
	return 0;
}

/* A log of batches of 1..3 records, 64 KiB of the ring released so the
 * last batch wraps: its first SPAN bytes are kept as the base. */
static void
fuzz_setup(void)
{
	const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	unsigned char data[8192];
	struct journal_replay_stats st;
	char err[256];

	snprintf(fuzz_dir, sizeof fuzz_dir, "%s/wbd-fuzz-journal.XXXXXX", tmp);
	FUZZ_CHECK(mkdtemp(fuzz_dir) != NULL);
	snprintf(fuzz_path, sizeof fuzz_path, "%s/log", fuzz_dir);
	snprintf(fuzz_state, sizeof fuzz_state, "%s.state", fuzz_path);
	atexit(fuzz_cleanup);
	struct journal *j = journal_open(fuzz_path, JOURNAL_MIN_SIZE, &fuzz_id,
	    err, sizeof err);
	FUZZ_CHECK(j != NULL);
	FUZZ_CHECK(journal_replay(j, nothing, NULL, &st) == 0);
	for (size_t i = 0; i < sizeof data; i++)
		data[i] = (unsigned char)(i * 13);
	for (unsigned b = 0; b < 40; b++) {
		struct journal_rec recs[3];
		unsigned n = b % 3 + 1;
		for (unsigned i = 0; i < n; i++)
			recs[i] = (struct journal_rec){
				.type = i == 1 ? JOURNAL_REC_ZERO :
						 JOURNAL_REC_WRITE,
				.off = (uint64_t)(b * 3 + i) * 8192,
				.len = 512u << (b % 5),
				.data = data,
			};
		if (!journal_fits(j, journal_batch_bytes(n, 3 * 8192))) {
			struct journal_usage u;
			journal_get_usage(j, &u);
			journal_release(j, u.next_seq - 3);
			FUZZ_CHECK(journal_checkpoint(j) == 0);
		}
		FUZZ_CHECK(journal_append(j, recs, n) == 0);
	}
	FUZZ_CHECK(journal_sync(j) == 0);
	journal_close(j);
	int fd = open(fuzz_path, O_RDONLY);
	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(pread(fd, base, SPAN, 0) == SPAN);
	base_size = (uint64_t)lseek(fd, 0, SEEK_END);
	close(fd);
}

/* Put BUF (SPAN bytes) at the start of the log, the rest as it was. */
static void
fuzz_write(const unsigned char *buf)
{
	int fd = open(fuzz_path, O_WRONLY);

	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(pwrite(fd, buf, SPAN, 0) == SPAN);
	FUZZ_CHECK(ftruncate(fd, (off_t)base_size) == 0);
	close(fd);
}

/* Make every record's CRC in the first SPAN bytes good again, walking
 * them as the reader does (header: payload at 36, CRC at 44). */
static void
fuzz_fix_records(unsigned char *buf)
{
	for (uint64_t pos = JOURNAL_AREA_START;
	     pos + JOURNAL_REC_HDR <= SPAN;) {
		unsigned char *h = buf + pos;
		uint32_t payload = (uint32_t)h[36] | (uint32_t)h[37] << 8 |
		    (uint32_t)h[38] << 16 | (uint32_t)h[39] << 24;
		uint64_t len =
		    (JOURNAL_REC_HDR + (uint64_t)payload + 63) / 64 * 64;
		if (pos + len > SPAN)
			break;
		memset(h + 44, 0, 4);
		uint32_t crc = crc32c_update(0, h, JOURNAL_REC_HDR);
		crc = crc32c_update(crc, h + JOURNAL_REC_HDR, payload);
		for (int i = 0; i < 4; i++)
			h[44 + i] = (unsigned char)(crc >> (8 * i));
		pos += len;
		if (h[6] & 1) /* a batch's last: the next starts aligned */
			pos = (pos + JOURNAL_BATCH_ALIGN - 1) /
			    JOURNAL_BATCH_ALIGN * JOURNAL_BATCH_ALIGN;
	}
}

static void
fuzz_fix_superblocks(unsigned char *buf)
{
	for (unsigned s = 0; s < 2; s++) {
		unsigned char *sb = buf + s * JOURNAL_SB_SIZE;
		uint32_t crc = crc32c_update(0, sb, JOURNAL_SB_SIZE - 4);
		for (int i = 0; i < 4; i++)
			sb[JOURNAL_SB_SIZE - 4 + i] =
			    (unsigned char)(crc >> (8 * i));
	}
}

/* The state file (journal.c's format) naming the uuid in the newer of
 * BUF's superblock slots, as they are (into UUID), and BELOW. */
static void
fuzz_write_state(const unsigned char *buf, uint64_t below,
    unsigned char uuid_out[JOURNAL_UUID_LEN])
{
	char text[256];
	uint64_t gen[2];

	for (unsigned s = 0; s < 2; s++) {
		gen[s] = 0;
		for (int i = 7; i >= 0; i--)
			gen[s] =
			    gen[s] << 8 | buf[s * JOURNAL_SB_SIZE + 16 + i];
	}
	const unsigned char *uuid =
	    buf + (gen[1] > gen[0] ? JOURNAL_SB_SIZE : 0) + 24;
	memcpy(uuid_out, uuid, JOURNAL_UUID_LEN);
	int n = snprintf(text, sizeof text, "wbd write log state 1\nuuid ");
	for (unsigned i = 0; i < JOURNAL_UUID_LEN; i++)
		n += snprintf(text + n, sizeof text - (size_t)n, "%02x",
		    uuid[i]);
	n += snprintf(text + n, sizeof text - (size_t)n, "\nstale_below %llu\n",
	    (unsigned long long)below);
	n += snprintf(text + n, sizeof text - (size_t)n, "crc32c %08x\n",
	    crc32c_update(0, text, (size_t)n));
	int fd = open(fuzz_state, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(write(fd, text, (size_t)n) == n);
	close(fd);
}

struct fuzz_seen {
	uint64_t first_seq, last_seq, n;
};

static int
fuzz_check_rec(void *arg, const struct journal_rec *rec)
{
	struct fuzz_seen *s = arg;

	FUZZ_CHECK(rec->seq > s->last_seq);
	if (!s->first_seq)
		s->first_seq = rec->seq;
	FUZZ_CHECK(rec->type == JOURNAL_REC_WRITE ||
	    rec->type == JOURNAL_REC_ZERO || rec->type == JOURNAL_REC_TRIM);
	if (rec->type == JOURNAL_REC_WRITE) {
		FUZZ_CHECK(rec->data != NULL);
		volatile unsigned char last =
		    ((const unsigned char *)rec->data)[rec->len - 1];
		(void)last;
	}
	s->last_seq = rec->seq;
	s->n++;
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char buf[SPAN];
	static int ready;
	struct journal_replay_stats st;
	struct fuzz_seen seen = { 0 };
	char err[512] = "";

	if (!ready) {
		fuzz_setup();
		ready = 1;
	}
	if (size == 0)
		return 0;
	memcpy(buf, base, SPAN);
	for (size_t i = 1; i + 4 <= size; i += 4) {
		uint32_t off = (uint32_t)data[i] | (uint32_t)data[i + 1] << 8 |
		    (uint32_t)data[i + 2] << 16;
		buf[off % SPAN] = data[i + 3];
	}
	if (data[0] & 1)
		fuzz_fix_records(buf);
	if (data[0] & 2)
		fuzz_fix_superblocks(buf);
	fuzz_write(buf);
	unlink(fuzz_state);
	unsigned char state_uuid[JOURNAL_UUID_LEN];
	uint64_t below = 1 + 4 * (uint64_t)(data[0] >> 3);
	if (data[0] & 4)
		fuzz_write_state(buf, below, state_uuid);

	struct journal *j =
	    journal_open(fuzz_path, 0, &fuzz_id, err, sizeof err);
	if (!j) {
		FUZZ_CHECK(err[0] != '\0');
		return 0;
	}
	int r = journal_replay(j, fuzz_check_rec, &seen, &st);
	FUZZ_CHECK(r <= 0);
	FUZZ_CHECK(st.end_why != NULL);
	/* No record the state file (when it names this log) says stale. */
	FUZZ_CHECK(!seen.n || seen.first_seq >= st.stale_below);
	if (r == 0 && (data[0] & 4)) {
		struct journal_usage u;
		journal_get_usage(j, &u);
		if (memcmp(u.uuid, state_uuid, sizeof state_uuid) == 0)
			FUZZ_CHECK(st.stale_below == below);
	}
	if (r < 0 || journal_broken(j)) {
		journal_close(j);
		return 0;
	}
	/* Still a log: a new batch is the next open's last. */
	static const unsigned char one[512] = { 1 };
	struct journal_rec rec = { .type = JOURNAL_REC_WRITE,
		.off = 4096,
		.len = sizeof one,
		.data = one };
	if (!journal_fits(j, journal_batch_bytes(1, sizeof one))) {
		journal_release(j, UINT64_MAX);
		FUZZ_CHECK(journal_checkpoint(j) == 0);
	}
	FUZZ_CHECK(journal_append(j, &rec, 1) == 0);
	FUZZ_CHECK(journal_sync(j) == 0);
	journal_close(j);
	j = journal_open(fuzz_path, 0, &fuzz_id, err, sizeof err);
	FUZZ_CHECK(j != NULL);
	memset(&seen, 0, sizeof seen);
	FUZZ_CHECK(journal_replay(j, fuzz_check_rec, &seen, &st) == 0);
	FUZZ_CHECK(!seen.n || seen.first_seq >= st.stale_below);
	if (!(data[0] & 2))
		FUZZ_CHECK(seen.n >= 1 && st.last_seq == rec.seq);
	journal_close(j);
	return 0;
}
