#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The write connection fails alone, and the remote drops with it the
# writes it had answered on it that no FLUSH covered (conn-volatile.py:
# a multi-conn disk whose volatile cache is kept per connection, as NBD
# allows).  libnbd's connections stay up, so only the write connection's
# own failure can tell wbd that what it wrote back there may be gone:
# counted as a lost connection, it makes the next FLUSH write again what
# wbd wrote since the remote's last FLUSH (wb_redo), and a FLUSH that
# succeeds must find every byte on the remote's stable store.  The
# remote is checked first to really drop one connection's unflushed
# writes and keep a FLUSHed one's, and the dropped writes are checked to
# be wbd's written-back data, so the test can fail.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
SLOW=$T/slow
start_conn_volatile slow="$SLOW"
URI=$(kit_uri "$KIT_SOCK")

# 0. One connection's unflushed write goes with it; a write any FLUSH
# covered stays, and reaches the stable store.
"$PYTHON" - "$URI" "$STORE" <<'PY' || fail "the remote does not drop one connection's unflushed writes"
import nbd, sys
def conn():
    h = nbd.NBD()
    h.connect_uri(sys.argv[1])
    return h
a, b = conn(), conn()
assert a.can_multi_conn()
a.pwrite(b"\x11" * 4096, 0)
b.pwrite(b"\x22" * 4096, 4096)
assert a.pread(4096, 4096) == b"\x22" * 4096, "a write not seen on another connection"
b.shutdown()
import time
for i in range(100):                    # the server closes it after the reply
    if a.pread(4096, 4096) == bytes(4096):
        break
    time.sleep(0.05)
else:
    sys.exit("a closed connection's unflushed write stayed")
a.flush()
a.shutdown()
c = conn()
assert c.pread(4096, 0) == b"\x11" * 4096, "a flushed write was dropped"
c.shutdown()
assert open(sys.argv[2], "rb").read(4096) == b"\x11" * 4096, "a FLUSH did not save"
PY
grep -q 'close: conn [0-9]* dropped 1 blocks' "$T/kit.log" ||
	fail "the remote's log does not say what it dropped: $(cat "$T/kit.log")"

add_remote_export disk0 "$URI"
write_cache_config 64M 'dirty_expire_centisecs = 20; dirty_writeback_centisecs = 10;'
add_remote_settings 'commit_interval_ms = 0; io_timeout_ms = 1000; reconnect_max_ms = 200;'
start_wbd

# 1. Written back on the write connection and answered, never flushed.
# A first write opens it (the writes before may go through libnbd).
head -c 4096 /dev/urandom >"$T/first"
write_file_at $((12 * MiB)) "$T/first"
wait_clean 30
wait_remote_field write_connection True || fail "wbctl status: write_connection is not true"
head -c $((4 * MiB)) /dev/urandom >"$T/a"
write_file_at 0 "$T/a"
wait_clean 30

# 2. The next write on it gets no reply for 3 s (io_timeout_ms is 1 s):
# wbd gives the write connection up, closes it, and the remote drops the
# writes answered there.
head -c 4096 /dev/urandom >"$T/b"
mark=$(wc -l <"$T/kit.log")
touch "$SLOW"
write_file_at $((8 * MiB)) "$T/b"
# dropped_line: the first close after the mark that dropped anything.
dropped_line() { tail -n +$((mark + 1)) "$T/kit.log" | grep -m1 'close: conn [0-9]* dropped [1-9]'; }
for ((i = 0; i < 150; i++)); do
	dropped_line >/dev/null && break
	sleep 0.1
done
line=$(dropped_line) ||
	fail "no connection to the remote closed with writes on it within 15 s: $(cat "$T/kit.log")"
dropped=$(sed 's/.*dropped \([0-9]*\) blocks.*/\1/' <<<"$line")
((dropped >= 1024)) ||
	fail "the remote dropped $dropped blocks, not wbd's 4 MiB written back (the writes did not go on the closed connection)"
[[ -e $SLOW ]] && fail "the slow write never reached the remote"
grep -q 'the write connection failed' "$LOG" ||
	fail "the log does not say the write connection failed"
failures=$(remote_field write_connection_failures)
((failures >= 1)) || fail "wbctl status: write_connection_failures is $failures"
log "the write connection timed out; the remote dropped $dropped blocks answered on it"

# 3. A FLUSH that succeeds has it all on the stable store.
flush_until_ok
on_stable_store "$STORE" "$T/a" 0 "$T/b" $((8 * MiB)) "$T/first" $((12 * MiB))
redo=$(remote_field rewritten_after_loss_bytes)
((redo >= 4 * MiB)) || fail "rewritten_after_loss_bytes is $redo, expected at least 4 MiB"
grep -q 'its remote was lost before a flush covered what was written to it: writing' "$LOG" ||
	fail "no log line for the data written again"
log "the FLUSH wrote $((redo >> 20)) MiB again: every byte on the stable store"

# 4. wbd closes the write connection itself: a reload turns it off (as
# lowering remote.max_connections would close one).  The remote drops
# the writes answered there that no FLUSH covered, as at a failure; the
# close counts as a loss, so the next FLUSH writes them again.
rm -f "$SLOW"
wait_remote_field write_connection True || fail "the write connection did not open again after its failure"
head -c $((2 * MiB)) /dev/urandom >"$T/c"
write_file_at $((4 * MiB)) "$T/c"
wait_clean 30
redo0=$(remote_field rewritten_after_loss_bytes)
mark=$(wc -l <"$T/kit.log")
sed -i 's/commit_interval_ms = 0;/commit_interval_ms = 0; write_connection = false;/' "$CONF"
grep -q 'write_connection = false;' "$CONF" || fail "could not edit $CONF"
reload_remote
# A write asks for the write connection: found off, it is closed.
head -c 4096 /dev/urandom >"$T/d"
write_file_at $((14 * MiB)) "$T/d"
wait_remote_field write_connection False || fail "write_connection = false left it open"
for ((i = 0; i < 100; i++)); do
	dropped_line >/dev/null && break
	sleep 0.1
done
line=$(dropped_line) || fail "the remote did not drop the closed write connection's writes: $(tail -n 5 "$T/kit.log")"
dropped=$(sed 's/.*dropped \([0-9]*\) blocks.*/\1/' <<<"$line")
((dropped >= 512)) || fail "the remote dropped $dropped blocks, not the 2 MiB written back on the write connection"
flush_until_ok
on_stable_store "$STORE" "$T/c" $((4 * MiB)) "$T/d" $((14 * MiB))
redo=$(remote_field rewritten_after_loss_bytes)
((redo - redo0 >= 2 * MiB)) || fail "rewritten_after_loss_bytes grew by $((redo - redo0)), expected at least 2 MiB"
log "write connection closed by a reload: the remote dropped $dropped blocks, the FLUSH wrote $(((redo - redo0) >> 20)) MiB again"
assert_alive
stop_wbd
