#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A remote with a volatile write cache (flushed-only.py: what no FLUSH
# covered is gone when the server is killed and started again) restarts
# after wbd wrote data back to it and before any FLUSH: a FLUSH through
# wbd that succeeds afterwards must find the data on the remote's stable
# store.  wbd writes again what it had written since the remote's last
# FLUSH (it still holds it in its cache); without that, the FLUSH goes to
# the new server and succeeds over the hole.  Then the same with a cache
# too small to hold it all: what wbd no longer holds is reported as a
# failed FLUSH (EIO, once per connection), never as a success.  The remote
# is checked first to really lose an unflushed write, so the test can fail.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl
nbdkit python --version >/dev/null 2>&1 ||
	skip "nbdkit's python plugin (nbdkit-plugin-python) is not installed"

PLUGIN=$SRCDIR/flushed-only.py
SIZE=$((16 << 20))
STORE=$T/remote.img

# restart_remote: kill the remote (its volatile cache goes) and start it
# again on the same socket and store.
restart_remote() {
	stop_kit "$KIT_PID" KILL
	start_nbdkit kit python "$PLUGIN" file="$STORE" size=$SIZE
}

# 0. The remote loses what no FLUSH covered, and keeps what one did.
start_nbdkit kit python "$PLUGIN" file="$STORE" size=$SIZE
"$PYTHON" - "$(kit_uri "$KIT_SOCK")" <<'PY' || fail "the remote does not keep only flushed data"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(b"\x11" * 4096, 0)
h.flush()
h.pwrite(b"\x22" * 4096, 4096)
h.shutdown()
PY
restart_remote
"$PYTHON" - "$(kit_uri "$KIT_SOCK")" <<'PY' || fail "the remote does not keep only flushed data"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
assert h.pread(4096, 0) == b"\x11" * 4096, "a flushed write was lost"
assert h.pread(4096, 4096) == bytes(4096), "an unflushed write survived"
h.pwrite(bytes(8192), 0)
h.flush()
h.shutdown()
PY

# write DATA_FILE: write it at offset 0 through wbd, no FLUSH.
write_through_wbd() {
	"$PYTHON" - "$(uri_unix disk0)" "$1" <<'PY' || fail "writing through wbd"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(open(sys.argv[2], "rb").read(), 0)
h.shutdown()
PY
}

# check_remote_holds DATA_FILE: restart the remote (only its stable store
# is left) and compare.
check_remote_holds() {
	restart_remote
	"$PYTHON" - "$(kit_uri "$KIT_SOCK")" "$1" <<'PY' || fail "see above"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = open(sys.argv[2], "rb").read()
got = h.pread(len(data), 0)
h.shutdown()
if got != data:
    bad = sum(got[i:i + 4096] != data[i:i + 4096] for i in range(0, len(data), 4096))
    sys.exit("FAIL: after a FLUSH through wbd succeeded, %d of %d blocks "
             "are not on the remote's stable store" % (bad, len(data) // 4096))
PY
}

# 1. The cache holds it all: written again, the FLUSH durable.
head -c $((4 << 20)) /dev/urandom >"$T/data1"
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")"
write_cache_config 64M 'dirty_expire_centisecs = 20; dirty_writeback_centisecs = 10;'
add_remote_settings 'commit_interval_ms = 0; reconnect_max_ms = 200;'
start_wbd
write_through_wbd "$T/data1"
wait_clean 30
restart_remote                  # written back, never flushed: gone
flush_until_ok
check_remote_holds "$T/data1"
redo=$(remote_field rewritten_after_loss_bytes)
((redo >= 4 << 20)) || fail "rewritten_after_loss_bytes is $redo, expected at least 4 MiB"
grep -q 'its remote was lost before a flush covered what was written to it: writing' "$LOG" ||
	fail "no log line for the data written again"
log "a remote restarted before its FLUSH: $((redo >> 20)) MiB written again, the FLUSH durable"
assert_alive

# 2. FUA to a remote that offers FLUSH but not FUA (nbdkit's fua filter,
# its default mode): made as the write and a FLUSH, durable before the
# reply.
stop_wbd
stop_kit "$KIT_PID"
rm -f "$KIT_SOCK"
nbdkit -f -U "$KIT_SOCK" --filter=fua python "$PLUGIN" file="$STORE" \
	size=$SIZE >>"$T/kit.log" 2>&1 &
KIT_PID=$!
_KIT_PIDS+=("$KIT_PID")
for ((i = 0; i < 100; i++)); do [[ -S $KIT_SOCK ]] && break; sleep 0.1; done
[[ -S $KIT_SOCK ]] || fail "nbdkit with the fua filter did not start: $(cat "$T/kit.log")"
"$PYTHON" - "$(kit_uri "$KIT_SOCK")" <<'PY' || fail "the fua filter still offers FUA"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
assert h.can_flush() and not h.can_fua()
PY
start_wbd
head -c $((1 << 20)) /dev/urandom >"$T/data3"
"$PYTHON" - "$(uri_unix disk0)" "$T/data3" <<'PY' || fail "writing with FUA through wbd"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
assert h.can_fua()
h.pwrite(open(sys.argv[2], "rb").read(), 0, nbd.CMD_FLAG_FUA)
h.shutdown()
PY
stop_kit "$KIT_PID" KILL       # no FLUSH since but the FUA write's own
start_nbdkit kit python "$PLUGIN" file="$STORE" size=$SIZE
"$PYTHON" - "$(kit_uri "$KIT_SOCK")" "$T/data3" <<'PY' || fail "a FUA write to a remote without FUA was not durable"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = open(sys.argv[2], "rb").read()
assert h.pread(len(data), 0) == data, "the FUA write is not on the stable store"
PY
log "a FUA write to a remote without FUA: made durable (write and FLUSH)"
stop_wbd

# 3. A cache of 4 MiB, 12 MiB written: most of it evicted before the
# restart.  No FLUSH may succeed as if it were there: the first that can
# reach the remote fails with EIO (a writeback failure, once).
head -c $((12 << 20)) /dev/urandom >"$T/data2"
write_cache_config 4M 'dirty_expire_centisecs = 20; dirty_writeback_centisecs = 10;'
add_remote_settings 'commit_interval_ms = 0; reconnect_max_ms = 200;'
start_wbd
"$PYTHON" - "$(uri_unix disk0)" "$T/data2" "$T/step" >"$T/client2.log" 2>&1 <<'PY' &
import nbd, os, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = open(sys.argv[2], "rb").read()
for off in range(0, len(data), 1 << 20):
    h.pwrite(data[off:off + (1 << 20)], off)
open(sys.argv[3] + ".written", "w").close()
while not os.path.exists(sys.argv[3] + ".restarted"):
    time.sleep(0.05)
errors = 0
for attempt in range(4):
    try:
        h.flush()
        break
    except nbd.Error as e:
        errors += 1
        print("FLUSH %d: %s" % (attempt + 1, e))
h.shutdown()
if errors == 0:
    sys.exit("FAIL: a FLUSH succeeded after the remote lost data wbd no longer holds")
PY
client=$!
for ((i = 0; i < 300; i++)); do
	[[ -e $T/step.written ]] && break
	proc_alive "$client" || break
	sleep 0.1
done
[[ -e $T/step.written ]] || fail "the client did not write: $(cat "$T/client2.log")"
wait_clean 30
restart_remote
touch "$T/step.restarted"
wait "$client" || fail "$(cat "$T/client2.log")"
grep -q 'are no longer cached and may be lost' "$LOG" ||
	fail "no log line for the data that could not be written again"
log "a remote restarted with evicted pages unflushed: the FLUSH failed ($(grep -c '^FLUSH' "$T/client2.log") time(s)), never succeeded over the loss"
assert_alive
stop_wbd
