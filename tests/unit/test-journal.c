/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-journal.c - the write log on a real file: CRC-32C's check value and
 * its two paths agreeing; what is appended and synced is replayed after a
 * reopen, whole batches in order; a torn batch, a flipped bit and a
 * shortened file end the log at the last whole batch and say why; a log of
 * another export (name, size, backing) or something that is no log is
 * refused; the ring wraps, reclaims only what a checkpoint released, and
 * says when it is full; a batch half-written over an earlier run's torn
 * one is never mixed with it; records its state file marks stale are
 * never replayed (a damaged state file stops the replay); a checkpoint
 * written from the replay's callback holds at the next open; whether its
 * records were written ordered is kept until no record is left.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "crc32c.h"
#include "journal.h"

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)

static const struct journal_identity id_a = {
	.name = "disk0",
	.export_size = 64 * MiB,
	.backing = "nbd+unix:///disk0?socket=/run/kit.sock",
};

struct fixture {
	char dir[64];
	char path[96];
	char state[112]; /* PATH.state */
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);

	snprintf(f->dir, sizeof f->dir, "/tmp/test-journal.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof f->path, "%s/log", f->dir);
	snprintf(f->state, sizeof f->state, "%s.state", f->path);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	unlink(f->path);
	unlink(f->state);
	rmdir(f->dir);
	free(f);
	return 0;
}

static struct journal *
open_ok(const char *path, uint64_t size, const struct journal_identity *id)
{
	char err[512] = "";
	struct journal *j = journal_open(path, size, id, err, sizeof err);

	if (!j)
		fail_msg("journal_open: %s", err);
	return j;
}

/* Data whose every byte says which record (SEED) and where it is. */
static void
fill(unsigned char *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 9));
}

struct seen {
	unsigned n;
	struct journal_rec rec[256];
	uint32_t crc[256]; /* of each record's data */
};

static int
collect(void *arg, const struct journal_rec *rec)
{
	struct seen *s = arg;

	assert_true(s->n < 256);
	s->rec[s->n] = *rec;
	s->rec[s->n].data = NULL;
	s->crc[s->n] = rec->data ? crc32c_update(0, rec->data, rec->len) : 0;
	s->n++;
	return 0;
}

/* Append one batch of N 4 KiB writes (seeds FIRST...) at OFF... */
static void
append_writes(struct journal *j, unsigned first, unsigned n, uint32_t len)
{
	struct journal_rec recs[16];
	unsigned char *bufs = malloc((size_t)n * len);

	assert_true(n <= 16);
	for (unsigned i = 0; i < n; i++) {
		fill(bufs + (size_t)i * len, len, first + i);
		recs[i] = (struct journal_rec){ .type = JOURNAL_REC_WRITE,
			.off = (uint64_t)(first + i) * len,
			.len = len,
			.data = bufs + (size_t)i * len };
	}
	assert_int_equal(journal_append(j, recs, n), 0);
	for (unsigned i = 1; i < n; i++)
		assert_int_equal(recs[i].seq, recs[0].seq + i);
	free(bufs);
}

static void
check_write(const struct seen *s, unsigned i, unsigned seed, uint32_t len)
{
	unsigned char *buf = malloc(len);

	fill(buf, len, seed);
	assert_int_equal(s->rec[i].type, JOURNAL_REC_WRITE);
	assert_int_equal(s->rec[i].off, (uint64_t)seed * len);
	assert_int_equal(s->rec[i].len, len);
	assert_int_equal(s->crc[i], crc32c_update(0, buf, len));
	free(buf);
}

/* Overwrite LEN bytes of the file at OFF with BYTE, or read them. */
static void
poke(const char *path, uint64_t off, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, buf, len, (off_t)off), (ssize_t)len);
	close(fd);
}

static void
peek(const char *path, uint64_t off, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, len, (off_t)off), (ssize_t)len);
	close(fd);
}

static void
test_crc32c(void **state)
{
	unsigned char buf[1000];

	assert_int_equal(crc32c_update(0, "123456789", 9), 0xe3069283);
	assert_int_equal(crc32c_update_soft(0, "123456789", 9), 0xe3069283);
	fill(buf, sizeof buf, 3);
	for (size_t len = 0; len <= sizeof buf; len += 37)
		for (size_t at = 0; at < 9 && at < len; at++)
			assert_int_equal(crc32c_update(0, buf + at, len - at),
			    crc32c_update_soft(0, buf + at, len - at));
	uint32_t whole = crc32c_update(0, buf, sizeof buf);
	assert_int_equal(crc32c_update(crc32c_update(0, buf, 333), buf + 333,
			     sizeof buf - 333),
	    whole);
}

static void
test_replayed_after_reopen(void **state)
{
	struct fixture *f = *state;
	struct journal_replay_stats st;
	struct journal_usage u;
	struct seen s = { 0 };

	struct journal *j = open_ok(f->path, 4 * MiB, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	assert_int_equal(s.n, 0);
	assert_string_equal(st.end_why, "end of log");
	append_writes(j, 0, 1, 4096);
	append_writes(j, 1, 3, 4096);
	struct journal_rec z[2] = {
		{ .type = JOURNAL_REC_ZERO, .off = 1 * MiB, .len = 65536 },
		{ .type = JOURNAL_REC_TRIM, .off = 2 * MiB, .len = 8192 },
	};
	assert_int_equal(journal_append(j, z, 2), 0);
	append_writes(j, 9, 1, 512);
	assert_int_equal(journal_sync(j), 0);
	journal_get_usage(j, &u);
	assert_int_equal(u.records, 7);
	assert_int_equal(u.oldest_seq, 1);
	assert_int_equal(u.next_seq, 8);
	assert_int_equal(u.opens, 1);
	journal_close(j);

	j = open_ok(f->path, 0, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	assert_int_equal(s.n, 7);
	assert_int_equal(st.records, 7);
	assert_int_equal(st.batches, 4);
	assert_int_equal(st.first_seq, 1);
	assert_int_equal(st.last_seq, 7);
	assert_int_equal(st.dropped_records, 0);
	for (unsigned i = 0; i < 4; i++) {
		check_write(&s, i, i, 4096);
		assert_int_equal(s.rec[i].seq, i + 1);
	}
	assert_int_equal(s.rec[4].type, JOURNAL_REC_ZERO);
	assert_int_equal(s.rec[4].off, 1 * MiB);
	assert_int_equal(s.rec[4].len, 65536);
	assert_int_equal(s.rec[5].type, JOURNAL_REC_TRIM);
	check_write(&s, 6, 9, 512);
	/* Appends go on after the replayed records, which stay needed. */
	append_writes(j, 10, 1, 4096);
	journal_get_usage(j, &u);
	assert_int_equal(u.next_seq, 9);
	assert_int_equal(u.records, 8);
	assert_int_equal(u.opens, 2);
	assert_int_equal(journal_sync(j), 0);
	journal_close(j);

	memset(&s, 0, sizeof s);
	j = open_ok(f->path, 4 * MiB, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	assert_int_equal(s.n, 8);
	check_write(&s, 7, 10, 4096);
	journal_close(j);
}

/* The file offset of the record with sequence SEQ (0-based K in a log
 * of 4 KiB-aligned single records is easy; the tests lay them out). */
static void
test_torn_and_flipped(void **state)
{
	struct fixture *f = *state;
	struct journal_replay_stats st;
	struct seen s = { 0 };
	unsigned char zero[4096 + 64] = { 0 }, byte;

	struct journal *j = open_ok(f->path, 4 * MiB, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	append_writes(j, 0, 2, 4096); /* batch 1 at 0: 2 x 4160 bytes */
	append_writes(j, 2, 3, 4096); /* batch 2 at 12288 */
	assert_int_equal(journal_sync(j), 0);
	journal_close(j);

	/* Batch 2's last record never reached the disk. */
	uint64_t b2 = JOURNAL_AREA_START + 12288;
	poke(f->path, b2 + 2 * 4160, zero, sizeof zero);
	j = open_ok(f->path, 0, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	assert_int_equal(s.n, 2);
	check_write(&s, 1, 1, 4096);
	assert_string_equal(st.end_why, "torn batch");
	assert_int_equal(st.dropped_records, 2);
	assert_int_equal(st.end_off, b2 + 2 * 4160);
	journal_close(j);

	/* A flipped bit in batch 1's second record's data: nothing of it,
	 * and nothing after it. */
	peek(f->path, JOURNAL_AREA_START + 4160 + 64 + 100, &byte, 1);
	byte ^= 0x10;
	poke(f->path, JOURNAL_AREA_START + 4160 + 64 + 100, &byte, 1);
	memset(&s, 0, sizeof s);
	j = open_ok(f->path, 0, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	assert_int_equal(s.n, 0);
	assert_string_equal(st.end_why, "bad checksum");
	assert_int_equal(st.dropped_records, 1);
	assert_int_equal(st.end_off, JOURNAL_AREA_START + 4160);
	journal_close(j);
}

static void
test_shortened_file(void **state)
{
	struct fixture *f = *state;
	struct journal_replay_stats st;
	struct seen s = { 0 };

	struct journal *j = open_ok(f->path, 4 * MiB, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	append_writes(j, 0, 1, 4096);
	append_writes(j, 1, 2, 4096);
	assert_int_equal(journal_sync(j), 0);
	journal_close(j);
	/* Cut in the middle of batch 2's first record. */
	assert_int_equal(truncate(f->path, JOURNAL_AREA_START + 8192 + 1000),
	    0);
	j = open_ok(f->path, 4 * MiB, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	assert_int_equal(s.n, 1);
	check_write(&s, 0, 0, 4096);
	assert_true(st.short_by > 0);
	/* Its header is there, its data is not. */
	assert_string_equal(st.end_why, "bad checksum");
	journal_close(j);
}

static void
refused(const char *path, uint64_t size, const struct journal_identity *id,
    const char *why)
{
	char err[512] = "";
	struct journal *j = journal_open(path, size, id, err, sizeof err);

	assert_null(j);
	if (!strstr(err, why))
		fail_msg("expected \"%s\" in: %s", why, err);
}

static void
test_another_exports_log_is_refused(void **state)
{
	struct fixture *f = *state;
	struct journal_replay_stats st;
	struct seen s = { 0 };
	struct journal_identity other = id_a;

	struct journal *j = open_ok(f->path, 4 * MiB, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	append_writes(j, 0, 1, 4096);
	assert_int_equal(journal_sync(j), 0);
	journal_close(j);

	other.name = "disk1";
	refused(f->path, 0, &other, "holds the log of export \"disk0\"");
	other = id_a;
	other.export_size = 128 * MiB;
	refused(f->path, 0, &other, "refusing to replay it onto the wrong");
	other = id_a;
	other.backing = "/dev/sdb";
	refused(f->path, 0, &other, "backing nbd+unix:///disk0");
	refused(f->path, 8 * MiB, &id_a, "the configured size differs");
	/* Its own export still opens it, and nothing was lost. */
	j = open_ok(f->path, 4 * MiB, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	assert_int_equal(s.n, 1);
	journal_close(j);

	/* Something that is no log is not overwritten. */
	unlink(f->path);
	int fd = open(f->path, O_CREAT | O_WRONLY, 0600);
	assert_int_equal(write(fd, "ext4 superblock?", 16), 16);
	assert_int_equal(ftruncate(fd, 4 * MiB), 0);
	close(fd);
	refused(f->path, 4 * MiB, &id_a, "not a wbd write log");
	unlink(f->path);
	refused(f->path, 64 * KiB, &id_a, "too small");
}

static void
test_ring_wraps_and_reclaims(void **state)
{
	struct fixture *f = *state;
	struct journal_replay_stats st;
	struct journal_usage u;
	struct seen s = { 0 };
	uint64_t size = JOURNAL_MIN_SIZE; /* 1 MiB of records */
	unsigned seed = 0;

	struct journal *j = open_ok(f->path, size, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	/* Batches of 3 x 64 KiB (196 KiB aligned): 5 fit with the block
	 * kept free, the 6th does not. */
	for (int i = 0; i < 5; i++, seed += 3)
		append_writes(j, seed, 3, 64 * KiB);
	uint64_t batch = journal_batch_bytes(3, 3 * 64 * KiB);
	assert_false(journal_fits(j, batch));
	struct journal_rec one = { .type = JOURNAL_REC_WRITE, .len = 64 * KiB };
	unsigned char *buf = calloc(1, 64 * KiB);
	struct journal_rec big[3] = { one, one, one };
	for (int i = 0; i < 3; i++)
		big[i].data = buf;
	assert_int_equal(journal_append(j, big, 3), -ENOSPC);
	assert_false(journal_broken(j));

	/* Released but not checkpointed: still no room. */
	journal_release(j, 7); /* the first two batches */
	assert_false(journal_fits(j, batch));
	journal_get_usage(j, &u);
	assert_true(u.releasable > 0);
	assert_int_equal(journal_checkpoint(j), 0);
	assert_true(journal_fits(j, batch));

	/* Many laps, each keeping the last two batches needed. */
	for (int lap = 0; lap < 40; lap++, seed += 3) {
		append_writes(j, seed, 3, 64 * KiB);
		journal_get_usage(j, &u);
		journal_release(j, u.next_seq - 6);
		assert_int_equal(journal_checkpoint(j), 0);
	}
	assert_int_equal(journal_sync(j), 0);
	journal_get_usage(j, &u);
	uint64_t next = u.next_seq;
	journal_close(j);

	j = open_ok(f->path, 0, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	/* The two batches not released, in order, whatever wraps there
	 * were between them. */
	assert_int_equal(s.n, 6);
	for (unsigned i = 0; i < 6; i++)
		check_write(&s, i, seed - 6 + i, 64 * KiB);
	assert_int_equal(st.last_seq, next - 1);
	/* Everything released: the next open replays nothing. */
	journal_release(j, next);
	assert_int_equal(journal_checkpoint(j), 0);
	journal_get_usage(j, &u);
	assert_int_equal(u.records, 0);
	assert_int_equal(u.used, 0);
	journal_close(j);
	memset(&s, 0, sizeof s);
	j = open_ok(f->path, 0, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	assert_int_equal(s.n, 0);
	journal_close(j);
	free(buf);
}

/*
 * Run 1 leaves batch B (2 records) torn: its second record never written.
 * Run 2 replays without B and writes C, two records of the same sizes, at
 * the same place; C's second record is lost while B's old one is still
 * there.  Run 3 must not replay C's first with B's second: they are of
 * different runs.
 */
static void
test_runs_are_never_mixed(void **state)
{
	struct fixture *f = *state;
	struct journal_replay_stats st;
	struct seen s = { 0 };
	unsigned char b2[4160], zero[4160] = { 0 };
	uint64_t at = JOURNAL_AREA_START + 8192 + 4160; /* B's 2nd record */

	struct journal *j = open_ok(f->path, 4 * MiB, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	append_writes(j, 0, 1, 4096); /* A */
	append_writes(j, 1, 2, 4096); /* B */
	assert_int_equal(journal_sync(j), 0);
	journal_close(j);
	peek(f->path, at, b2, sizeof b2);
	poke(f->path, at, zero, sizeof zero);

	j = open_ok(f->path, 0, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	assert_int_equal(s.n, 1);
	append_writes(j, 5, 2, 4096); /* C, over B */
	assert_int_equal(journal_sync(j), 0);
	journal_close(j);
	poke(f->path, at, b2, sizeof b2);

	memset(&s, 0, sizeof s);
	j = open_ok(f->path, 0, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	assert_int_equal(s.n, 1);
	check_write(&s, 0, 0, 4096);
	assert_int_equal(st.dropped_records, 1);
	journal_close(j);
}

/* The ordered log applies its batches from the log: each record's
 * payload is read back where append and replay say it is, and replay
 * marks each batch's last record. */
static void
test_records_read_back_where_they_lie(void **state)
{
	struct fixture *f = *state;
	struct journal_replay_stats st;
	struct journal_rec recs[3];
	unsigned char data[3][8192], back[8192];
	struct seen s = { 0 };

	struct journal *j = open_ok(f->path, 4 * MiB, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	for (unsigned i = 0; i < 3; i++) {
		fill(data[i], sizeof data[i], 40 + i);
		recs[i] = (struct journal_rec){ .type = JOURNAL_REC_WRITE,
			.off = i * 8192,
			.len = i == 1 ? 4096 : 8192,
			.data = data[i] };
	}
	assert_int_equal(journal_append(j, recs, 2), 0);
	assert_int_equal(journal_append(j, recs + 2, 1), 0);
	assert_int_equal(journal_sync(j), 0);
	for (unsigned i = 0; i < 3; i++) {
		assert_true(recs[i].pos >= JOURNAL_AREA_START);
		assert_int_equal(journal_read(j, recs[i].pos, back,
				     recs[i].len),
		    0);
		assert_memory_equal(back, data[i], recs[i].len);
	}
	uint64_t pos[3] = { recs[0].pos, recs[1].pos, recs[2].pos };
	journal_close(j);

	j = open_ok(f->path, 4 * MiB, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	assert_int_equal(s.n, 3);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(s.rec[i].pos, pos[i]);
	assert_false(s.rec[0].last);
	assert_true(s.rec[1].last);
	assert_true(s.rec[2].last);
	journal_close(j);
}

/* A log marked stale (journal_mark_stale, its state file): a replay
 * gives none of its records and gives their space back at once; what is
 * appended afterwards is replayed as usual, state file or not. */
static void
test_stale_records_never_replayed(void **state)
{
	struct fixture *f = *state;
	struct journal_replay_stats st;
	struct journal_usage u;
	struct seen s = { 0 };

	struct journal *j = open_ok(f->path, 4 * MiB, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	append_writes(j, 0, 2, 4096);
	append_writes(j, 2, 1, 4096);
	assert_int_equal(journal_sync(j), 0);
	assert_int_equal(journal_mark_stale(j), 0);
	journal_close(j);
	assert_int_equal(access(f->state, F_OK), 0);
	struct journal_peek pk;
	assert_int_equal(journal_peek(f->path, NULL, &pk), 1);
	assert_false(pk.has_records);

	j = open_ok(f->path, 0, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	assert_int_equal(s.n, 0);
	assert_int_equal(st.records, 0);
	assert_int_equal(st.stale_records, 3);
	assert_int_equal(st.stale_below, 4);
	journal_get_usage(j, &u);
	assert_int_equal(u.records, 0);
	assert_int_equal(u.used, 0);
	assert_int_equal(u.next_seq, 4);
	append_writes(j, 7, 2, 4096);
	assert_int_equal(journal_sync(j), 0);
	journal_close(j);

	/* The state file is still there: it names older records only. */
	assert_int_equal(journal_peek(f->path, NULL, &pk), 1);
	assert_true(pk.has_records);
	j = open_ok(f->path, 0, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	assert_int_equal(s.n, 2);
	check_write(&s, 0, 7, 4096);
	check_write(&s, 1, 8, 4096);
	assert_int_equal(s.rec[0].seq, 4);
	assert_int_equal(st.stale_records, 0);
	assert_int_equal(journal_state_remove(j), 1);
	assert_int_equal(journal_state_remove(j), 0);
	assert_int_not_equal(access(f->state, F_OK), 0);
	journal_close(j);

	memset(&s, 0, sizeof s);
	j = open_ok(f->path, 0, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	assert_int_equal(s.n, 2);
	journal_close(j);
}

/* A state file that is damaged stops the replay (which records are stale
 * cannot be told); one that names another log is of no concern. */
static void
test_state_file_damaged_or_another_logs(void **state)
{
	struct fixture *f = *state;
	struct journal_replay_stats st;
	struct seen s = { 0 };
	char text[256];

	struct journal *j = open_ok(f->path, 4 * MiB, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	append_writes(j, 0, 2, 4096);
	assert_int_equal(journal_sync(j), 0);
	assert_int_equal(journal_mark_stale(j), 0);
	journal_close(j);

	int fd = open(f->state, O_RDWR);
	assert_true(fd >= 0);
	ssize_t n = pread(fd, text, sizeof text - 1, 0);
	assert_true(n > 40);
	text[n] = '\0';
	char *below = strstr(text, "stale_below 3\n");
	assert_non_null(below);
	below[12] = '9'; /* a bit flipped: its CRC no longer matches */
	assert_int_equal(pwrite(fd, text, (size_t)n, 0), n);
	j = open_ok(f->path, 0, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), -EINVAL);
	assert_int_equal(s.n, 0);
	assert_string_equal(st.end_why, "its state file is damaged");
	journal_close(j);

	/* Another log's (another uuid, its CRC right). */
	below[12] = '3';
	char *uuid = strstr(text, "uuid ") + 5;
	uuid[0] = uuid[0] == '0' ? '1' : '0';
	char *crc = strstr(text, "crc32c ");
	snprintf(crc, sizeof text - (size_t)(crc - text), "crc32c %08x\n",
	    crc32c_update(0, text, (size_t)(crc - text)));
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(pwrite(fd, text, strlen(text), 0),
	    (ssize_t)strlen(text));
	close(fd);
	j = open_ok(f->path, 0, &id_a);
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	assert_int_equal(s.n, 2);
	assert_int_equal(st.stale_records, 0);
	assert_int_equal(journal_state_remove(j), 1);
	journal_close(j);
}

/* The ordered replay applies batches while it reads (a cache smaller than
 * the log) and checkpoints each one applied, from the replay's callback:
 * the next open starts after them. */
struct ckpt {
	struct journal *j;
	struct seen s;
	uint64_t release; /* at the first record of batch 3: up to this */
};

static int
checkpoint_as_it_goes(void *arg, const struct journal_rec *rec)
{
	struct ckpt *c = arg;

	if (c->s.n == 3) {
		/* Batches 1 and 2 given, and applied: given back. */
		journal_release(c->j, c->release);
		assert_int_equal(journal_checkpoint(c->j), 0);
	}
	return collect(&c->s, rec);
}

static void
test_checkpoint_from_the_replay(void **state)
{
	struct fixture *f = *state;
	struct journal_replay_stats st;
	struct journal_usage u;
	struct ckpt c = { 0 };

	struct journal *j = open_ok(f->path, 4 * MiB, &id_a);
	assert_int_equal(journal_replay(j, collect, &c.s, &st), 0);
	append_writes(j, 0, 2, 4096); /* seqs 1, 2 */
	append_writes(j, 2, 1, 4096); /* 3 */
	append_writes(j, 3, 2, 4096); /* 4, 5 */
	append_writes(j, 5, 1, 4096); /* 6 */
	assert_int_equal(journal_sync(j), 0);
	journal_close(j);

	c.j = j = open_ok(f->path, 0, &id_a);
	c.release = 4;
	assert_int_equal(journal_replay(j, checkpoint_as_it_goes, &c, &st), 0);
	assert_int_equal(c.s.n, 6);
	assert_string_equal(st.end_why, "end of log");
	journal_get_usage(j, &u);
	assert_int_equal(u.oldest_seq, 4);
	assert_int_equal(u.records, 3);
	assert_int_equal(u.next_seq, 7);
	journal_close(j); /* a crash: nothing else written */

	memset(&c, 0, sizeof c);
	j = open_ok(f->path, 0, &id_a);
	assert_int_equal(journal_replay(j, collect, &c.s, &st), 0);
	assert_int_equal(c.s.n, 3);
	assert_int_equal(st.first_seq, 4);
	check_write(&c.s, 0, 3, 4096);
	check_write(&c.s, 2, 5, 4096);
	journal_close(j);
}

/* The superblock says whether its records were written by an ordered
 * log: a reopen keeps it whatever it is asked for, it may be turned off
 * at once, and on only once no record is left. */
static void
test_ordered_flag_kept_until_empty(void **state)
{
	struct fixture *f = *state;
	struct journal_identity ord = id_a;
	struct journal_replay_stats st;
	struct journal_usage u;
	struct seen s = { 0 };

	ord.ordered = true;
	struct journal *j = open_ok(f->path, 4 * MiB, &ord);
	assert_true(journal_ordered(j));
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	append_writes(j, 0, 2, 4096);
	assert_int_equal(journal_sync(j), 0);
	journal_close(j);

	/* Asked for unordered: still says how its records were written. */
	j = open_ok(f->path, 4 * MiB, &id_a);
	assert_true(journal_ordered(j));
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	assert_int_equal(s.n, 2);
	assert_int_equal(journal_set_ordered(j, false), 0);
	assert_false(journal_ordered(j));
	append_writes(j, 2, 1, 4096);
	assert_int_equal(journal_sync(j), 0);
	journal_close(j);

	/* Records written unordered: never said to be ordered while any is
	 * left, and every one of them still replayed. */
	memset(&s, 0, sizeof s);
	j = open_ok(f->path, 4 * MiB, &ord);
	assert_false(journal_ordered(j));
	assert_int_equal(journal_replay(j, collect, &s, &st), 0);
	assert_int_equal(s.n, 3);
	assert_int_equal(journal_set_ordered(j, true), -EBUSY);
	assert_false(journal_ordered(j));
	journal_get_usage(j, &u);
	journal_release(j, u.next_seq);
	assert_int_equal(journal_checkpoint(j), 0);
	assert_int_equal(journal_set_ordered(j, true), 0);
	assert_true(journal_ordered(j));
	journal_close(j);

	j = open_ok(f->path, 4 * MiB, &id_a);
	assert_true(journal_ordered(j));
	journal_close(j);
	/* A log made unordered says so. */
	unlink(f->path);
	j = open_ok(f->path, 4 * MiB, &id_a);
	assert_false(journal_ordered(j));
	journal_close(j);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c),
		cmocka_unit_test_setup_teardown(
		    test_records_read_back_where_they_lie, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replayed_after_reopen,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn_and_flipped, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_shortened_file, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_another_exports_log_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ring_wraps_and_reclaims,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_runs_are_never_mixed,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_stale_records_never_replayed, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_state_file_damaged_or_another_logs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_from_the_replay,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_ordered_flag_kept_until_empty, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
