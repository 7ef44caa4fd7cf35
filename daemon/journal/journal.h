/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * journal.h - an export's persistent write log on a local file or block
 * device: its on-disk format, and the calls that create, append to,
 * replay and reclaim it (docs/journal.md says why each choice).
 *
 * The log is a ring of records after two superblock slots.  A record is a
 * 64-byte header (type, the export's range, a sequence number, the log's
 * instance and open count, a CRC-32C over header and payload) and, for a
 * write, the data.  Records are appended in batches: one write per batch
 * (a group commit), then journal_sync.  A batch starts on a 4 KiB
 * boundary, so no sector that holds a synced record is ever written again
 * (a torn write of a later batch cannot take an earlier one with it).
 *
 * Recovery (journal_replay) reads from the checkpoint (the oldest record
 * still needed, kept in the newer of the two superblock slots) while each
 * record follows the last: the next sequence number, this log's instance,
 * the same open count through its batch, and a good CRC.  It gives only
 * whole batches, in order: a batch whose end was never written was never
 * synced, so no FLUSH that needed it was answered.
 *
 * Space comes back by sequence number: journal_release(seq) once every
 * record before seq is on the backing device (written and flushed there),
 * then journal_checkpoint makes that durable; only then may new records
 * use the space.
 *
 * A log that fails and cannot be emptied once the backing device holds
 * everything it does is marked stale in a small file, its state file
 * (journal_mark_stale: PATH.state beside it unless the identity names
 * another, written whole with a rename): a later replay gives none of its
 * records, and gives the space back at once.
 *
 * One owner at a time: the caller serialises every call on a journal
 * (journal_read excepted; journal_release and journal_checkpoint may be
 * called from a replay's callback, for batches it has given already).
 */
#ifndef WBD_JOURNAL_H
#define WBD_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JOURNAL_UUID_LEN 16
#define JOURNAL_NAME_MAX 255     /* bytes of an export's name */
#define JOURNAL_BACKING_MAX 1023 /* bytes of its backing */
#define JOURNAL_SB_SIZE 4096u    /* one superblock slot */
#define JOURNAL_AREA_START (2 * JOURNAL_SB_SIZE)
#define JOURNAL_BATCH_ALIGN 4096u /* where each batch starts */
#define JOURNAL_REC_HDR 64u       /* a record's header */
#define JOURNAL_REC_ALIGN 64u     /* records follow at this step */
/* The smallest log: the superblocks and 1 MiB of records. */
#define JOURNAL_MIN_SIZE (JOURNAL_AREA_START + (1u << 20))

/* What the log belongs to: refused unless all of it matches.  ORDERED is
 * not checked: a log made now says its records are ordered, one that
 * exists keeps what it says (journal_ordered) until journal_set_ordered. */
struct journal_identity {
	const char *name;     /* the export's */
	uint64_t export_size; /* bytes */
	const char *backing;  /* its path or URI, as configured */
	bool ordered;
	/* The log's state file (journal_mark_stale); NULL: PATH.state,
	 * beside the log. */
	const char *state_path;
};

enum journal_rec_type {
	JOURNAL_REC_WRITE = 1, /* LEN bytes of data at OFF */
	JOURNAL_REC_ZERO = 2,  /* LEN bytes of zeroes at OFF */
	JOURNAL_REC_TRIM = 3,  /* LEN bytes at OFF trimmed */
	JOURNAL_REC_WRAP = 4,  /* the ring goes on at its start */
};

/* A record to append, or one replayed. */
struct journal_rec {
	enum journal_rec_type type;
	uint64_t off;     /* in the export */
	uint32_t len;     /* bytes of the export */
	const void *data; /* JOURNAL_REC_WRITE: LEN bytes */
	uint64_t seq;     /* set by append, given by replay */
	/* Where its payload lies in the log's file (set by append, given
	 * by replay): journal_read reads it back. */
	uint64_t pos;
	bool last; /* replay: the last record of its batch */
};

/* What a replay found, for the log and wbctl status. */
struct journal_replay_stats {
	uint64_t records, batches, bytes; /* whole batches replayed */
	uint64_t first_seq, last_seq;     /* 0 if none */
	/* Where the log ended, and why (a static string): "end of log",
	 * "bad checksum", "torn batch", ... */
	uint64_t end_off;
	const char *end_why;
	/* Records read after the last whole batch and not replayed. */
	uint64_t dropped_records;
	/* Bytes the file was short of its size (grown back with zeroes). */
	uint64_t short_by;
	/* Records left out as stale (the state file, journal_mark_stale),
	 * and the sequence it names: every record below it; 0 if none. */
	uint64_t stale_records, stale_below;
};

/* Where a journal stands, for wbctl status. */
struct journal_usage {
	uint64_t size;       /* bytes for records */
	uint64_t used;       /* from the durable checkpoint to the tail */
	uint64_t releasable; /* released, not yet checkpointed */
	uint64_t records;    /* appended and not yet reclaimed */
	uint64_t oldest_seq; /* the oldest record still needed, 0 none */
	uint64_t next_seq;
	uint64_t opens; /* times opened (the open count) */
	uint8_t uuid[JOURNAL_UUID_LEN];
};

struct journal;

/*
 * Open the log at PATH for ID: create it (SIZE bytes; a file is made or
 * grown, a block device used whole when SIZE is 0) when it holds no log,
 * else check that it is ID's and of the same size.  The open count is
 * raised and a checkpoint written before it returns, so records appended
 * from now on can never be taken for records of an earlier run.  NULL
 * with ERR set (the path, and what is wrong: another export's log, another
 * size, no space) on failure.
 */
struct journal *journal_open(const char *path, uint64_t size,
    const struct journal_identity *id, char *err, size_t errlen);
void journal_close(struct journal *j);

/* What a log says about itself, read without opening it for writing. */
struct journal_peek {
	char name[JOURNAL_NAME_MAX + 1];
	char backing[JOURNAL_BACKING_MAX + 1];
	uint64_t export_size;
	uint8_t uuid[JOURNAL_UUID_LEN];
	/* A record follows the checkpoint: the log may hold data that is
	 * not yet on the backing device (a replay tells for sure). */
	bool has_records;
};

/*
 * Read the log at PATH's newer superblock and the header at its
 * checkpoint into PK, changing nothing: 1 if it is a log, 0 if PATH
 * holds none (missing, empty, zeroes, or something else), or a negative
 * errno.  Records its state file (STATE, or PATH.state if NULL) says are
 * stale do not count.  For a start that must decide, before opening the
 * backing device, whether an export has logged data to serve.
 */
int journal_peek(const char *path, const char *state, struct journal_peek *pk);

/*
 * Read the state file STATE (journal_mark_stale), changing nothing: 1
 * with *UUID (the log's it names) and *BELOW (every record of that log
 * below it is stale), 0 if there is none, -EINVAL if it is damaged (a
 * replay would stop), or another negative errno.  For wbd -n.
 */
int journal_state_peek(const char *state, uint8_t uuid[JOURNAL_UUID_LEN],
    uint64_t *below);

/*
 * A file name for NAME (an export's name, a log's path) in a directory
 * of logs or state files, in BUF (LEN bytes; JOURNAL_FILE_NAME_MAX plus
 * SUFFIX's length are enough): NAME with each byte other than a letter,
 * a digit, '-', '_' or a '.' not first written as "%XX" (upper case),
 * then SUFFIX.  A name longer than JOURNAL_FILE_NAME_CUT bytes once
 * written is cut there (never inside a "%XX"), and '~' and 16 hex digits
 * of a hash (FNV-1a, 64 bits) of the whole name follow.  So two names
 * give two files, but for two long names whose hashes agree.
 */
#define JOURNAL_FILE_NAME_CUT 180
#define JOURNAL_FILE_NAME_MAX (JOURNAL_FILE_NAME_CUT + 1 + 16)
void
journal_file_name(const char *name, const char *suffix, char *buf, size_t len);

/*
 * Replay: call CB for every record of every whole batch from the
 * checkpoint on, in order (each newer than those before it, so the last
 * record of a range is its newest).  CB's data pointer lasts for the call.
 * A non-zero return from CB stops the replay and is returned; else 0.
 * Once per open, before any append: appends go on after the last whole
 * batch, and the replayed records stay needed until released.
 *
 * The log's state file (journal_identity.state_path, journal_mark_stale)
 * is read first:
 * if it names this log, CB is given none of the records below the
 * sequence it names, and they are given back with a checkpoint before
 * journal_replay returns (a negative errno if that checkpoint fails: no
 * record may be appended before it is durable).  A state file that
 * cannot be read or makes no sense stops the replay with -EINVAL (ST's
 * end_why says so): which records are stale can no longer be told.
 */
typedef int journal_replay_cb(void *arg, const struct journal_rec *rec);
int journal_replay(struct journal *j, journal_replay_cb *cb, void *arg,
    struct journal_replay_stats *st);

/* Bytes a batch of N records carrying DATA_BYTES of data takes. */
uint64_t journal_batch_bytes(unsigned n, uint64_t data_bytes);
/* Whether a batch of that many bytes fits now. */
bool journal_fits(const struct journal *j, uint64_t batch_bytes);

/*
 * Append RECS[0..N) as one batch, one write, and set each one's seq.  Not
 * durable until journal_sync.  -ENOSPC when the batch does not fit (the
 * caller falls back to writing back and flushing the backing device),
 * -EIO (or another negative errno) when the write fails: the journal is
 * then broken for good (journal_broken), and nothing it has not synced
 * may be counted on.
 */
int journal_append(struct journal *j, struct journal_rec *recs, unsigned n);
/*
 * Read LEN bytes of a record's payload at POS (journal_rec.pos) back from
 * the log: the ordered log applies its batches to the backing device from
 * there.  A plain pread of a batch already synced: it may run on another
 * thread than the owner's, at the same time as any call but
 * journal_close (and it is not the owner's concern whether those bytes
 * were reclaimed since: the caller releases a batch only after reading
 * it).  0 or a negative errno.
 */
int journal_read(struct journal *j, uint64_t pos, void *buf, uint32_t len);
/* Make every appended batch durable (fdatasync).  0 or a negative errno
 * (which breaks the journal). */
int journal_sync(struct journal *j);
bool journal_broken(const struct journal *j);
/*
 * Leave no log: zero both superblock slots and sync (or, if that fails,
 * punch them out of the file or device), so that the next open finds
 * nothing to replay (and makes a new log).  For a broken log
 * once everything it holds is on the backing device: replaying its older
 * records over newer data there would undo FLUSHes answered since.  0 or
 * a negative errno (try again later).  The journal is broken afterwards.
 */
int journal_invalidate(struct journal *j);

/*
 * The log cannot be emptied (journal_invalidate failed), yet everything
 * it holds is on the backing device: say so outside it.  Write its state
 * file (journal_identity.state_path, or PATH.state)
 * (a temporary file synced, renamed over it, the directory synced) naming
 * the log's uuid and the sequence below which every record it may have
 * written lies, so that no start replays them over newer data.  0 or a
 * negative errno.
 */
int journal_mark_stale(struct journal *j);
/*
 * Remove the state file (and sync its directory) once the replay has given
 * its stale records back (journal_replay's checkpoint): 1 if there was
 * one, 0 if none, or a negative errno (harmless: it names only records
 * below every sequence appended from now on).
 */
int journal_state_remove(struct journal *j);

/*
 * Every record before SEQ is on the backing device, written and flushed:
 * its space may come back once a checkpoint says so.
 */
void journal_release(struct journal *j, uint64_t seq);
/* Write the checkpoint (the other superblock slot, then fdatasync), and
 * give back the space released before it.  0 or a negative errno. */
int journal_checkpoint(struct journal *j);

/*
 * Whether the records from the checkpoint on were appended by an ordered
 * log (journal.ordered; the superblock says so): an ordered log's may be
 * applied to the backing device as epochs, in order; an unordered log's
 * may not (its writeback from the cache may have put newer data there
 * already), and are written back from the cache.
 */
bool journal_ordered(const struct journal *j);
/*
 * Say from now on that records are appended ORDERED, and write the
 * superblock (a checkpoint at the same place).  Turning it on needs a log
 * with no record left (every one released and checkpointed): -EBUSY
 * else.  0 or a negative errno.
 */
int journal_set_ordered(struct journal *j, bool ordered);

void journal_get_usage(const struct journal *j, struct journal_usage *u);

#endif
