#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# FLUSH completes while another client keeps writing.  A writer connection
# streams 64K writes (8 in flight) over the first 16M for the whole run,
# and between them appends numbered 4K blocks to a log at [24M, 32M) (one
# every 2.5 ms), publishing after each acknowledged block how many it has.
# For 5 s a second connection writes its own block elsewhere, reads the
# writer's log count, and sends FLUSH.  Each FLUSH must return within 10 s
# (it must not wait for data dirtied after it), and when it returns the
# backing file must hold the flusher's block and every log block the writer
# had acknowledged before the FLUSH was sent (multi-conn: a FLUSH covers
# writes from every connection).
#
# The backing file is slow (nbdkit memory + delay filter, mounted with
# nbdfuse), so the writer, throttled at the default dirty limit, keeps dirty
# data near that limit all along: a FLUSH that waited for the cache to be
# clean instead of for the data dirtied before it would never return.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

start_slow_file "$T/slow" 32M 10ms
add_export_mode disk0 32M writeback "$SLOW_FILE"
write_cache_config 16M 'dirty_writeback_centisecs = 0;'
start_wbd

salt=$RANDOM
printf '%016d' 0 >"$T/log.count"
"$PYTHON" - "$(uri_unix disk0)" "$T/writer.stop" "$T/log.count" "$salt" <<'PY' >"$T/writer.out" 2>&1 &
import nbd, os, random, sys, time
uri, stop, count_path, salt = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
h = nbd.NBD()
h.connect_uri(uri)
rng = random.Random(5)
bufs = [nbd.Buffer.from_bytearray(bytearray(os.urandom(64 << 10))) for _ in range(4)]
count_fd = os.open(count_path, os.O_WRONLY)
start = time.monotonic()
n = logged = 0
while not os.path.exists(stop) and time.monotonic() - start < 60:
    while h.aio_in_flight() < 8:
        h.aio_pwrite(bufs[n % 4], rng.randrange(256) * (64 << 10))
        n += 1
    if logged < 2048 and time.monotonic() - start > logged * 0.0025:
        h.pwrite((salt * 4096 + logged).to_bytes(8, "little") * 512,
                 (24 << 20) + logged * 4096)
        logged += 1
        os.pwrite(count_fd, b"%016d" % logged, 0)
    h.poll(0)
while h.aio_in_flight() > 0:
    h.poll(-1)
print("writer: %d writes, %d log blocks" % (n, logged))
h.shutdown()
PY
writer_pid=$!
_PIDS+=("$writer_pid")
sleep 0.5
proc_alive "$writer_pid" || fail "the writer died: $(cat "$T/writer.out")"

"$PYTHON" - "$(uri_unix disk0)" "$SLOW_FILE" "$T/log.count" "$salt" <<'PY' || { touch "$T/writer.stop"; fail "see above"; }
import nbd, os, sys, time
uri, backing, count_path, salt = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
h = nbd.NBD()
h.connect_uri(uri)
worst = 0
start = time.monotonic()
i = 0
while time.monotonic() - start < 5 or i < 5:
    off = (16 << 20) + (i % 100) * 65536 + 1000 * (i % 50)   # unaligned
    buf = os.urandom(40000 + i)
    h.pwrite(buf, off)
    with open(count_path, "rb") as f:
        logged = int(f.read())
    # FLUSH with a deadline: an aio flush polled for at most 10 s.
    t0 = time.monotonic()
    cookie = h.aio_flush()
    while not h.aio_command_completed(cookie):
        if time.monotonic() - t0 > 10:
            sys.exit("FAIL: FLUSH %d did not return within 10 s under a "
                     "continuous writer" % i)
        h.poll(100)
    worst = max(worst, time.monotonic() - t0)
    with open(backing, "rb") as f:
        f.seek(off)
        if f.read(len(buf)) != buf:
            sys.exit("FAIL: after FLUSH %d returned, the block written "
                     "before it is not on the backing file" % i)
        f.seek(24 << 20)
        log = f.read(logged * 4096)
    for j in range(logged):
        if log[j * 4096:(j + 1) * 4096] != \
                (salt * 4096 + j).to_bytes(8, "little") * 512:
            sys.exit("FAIL: after FLUSH %d returned, log block %d, which the "
                     "other connection had acknowledged before the FLUSH "
                     "was sent, is not on the backing file" % (i, j))
    i += 1
print("%d FLUSHes under a continuous writer, slowest %.2f s, %d log blocks "
      "checked" % (i, worst, logged))
h.shutdown()
PY
touch "$T/writer.stop"
wait_exit "$writer_pid" 20 || fail "the writer did not stop"
[[ $EXIT_STATUS == 0 ]] || fail "the writer failed: $(cat "$T/writer.out")"
cat "$T/writer.out" >&2
assert_alive
