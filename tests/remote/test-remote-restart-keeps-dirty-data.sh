#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The remote is killed in the middle of writeback and started again later
# (nbdkit's file plugin, so its data survives): wbd logs the device as
# disconnected, keeps the dirty data, refuses reads it cannot serve with
# EIO after io_timeout_ms, reconnects with back-off and writes everything
# back: after a successful FLUSH nbdkit's file holds every byte.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl

truncate -s 64M "$T/remote.img"
# A slow remote, so that the kill lands mid-writeback: 40 MiB written in
# order go back in a few large runs (up to 32 MiB each), a second each.
start_nbdkit kit --filter=delay file "$T/remote.img" delay-write=1000ms
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")"
write_cache_config 128M 'dirty_background_bytes = "4M"; dirty_bytes = "100M"; dirty_writeback_centisecs = 10; dirty_expire_centisecs = 0;'
add_remote_settings 'connect_timeout_ms = 2000; reconnect_max_ms = 400; io_timeout_ms = 2000; write_behind = false;'
start_wbd

head -c 40M /dev/urandom >"$T/data"
"$PYTHON" - "$(uri_unix disk0)" "$T/data" <<'PY' || fail "writing through wbd failed"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = open(sys.argv[2], "rb").read()
for off in range(0, len(data), 1 << 20):
    h.pwrite(data[off:off + (1 << 20)], off)
h.shutdown()
PY
sleep 0.3
read -r dirty <<<"$(remote_wbctl status --json | "$PYTHON" -c 'import json, sys
c = json.load(sys.stdin)["cache"]
print(c["dirty_bytes"] + c["writeback_bytes"])')"
((dirty > 0)) || fail "everything was written back before the kill"
log "killing nbdkit mid-writeback ($dirty bytes not yet written back)"
stop_kit "$KIT_PID" KILL

wait_log 10 'disconnected' || true
grep -q "remote .* (device 43:0): disconnected" "$LOG" ||
	fail "wbd did not log the device as disconnected"
assert_alive

# While the remote is away: a read of data never cached fails with EIO
# after about io_timeout_ms, not never; a FLUSH fails.
"$PYTHON" - "$(uri_unix disk0)" <<'PY' || fail "see above"
import nbd, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
t0 = time.monotonic()
try:
    h.pread(4096, 60 << 20)
    sys.exit("FAIL: a read with the remote down succeeded")
except nbd.Error as e:
    took = time.monotonic() - t0
    if e.errno not in (None, 5, "EIO"):
        sys.exit("FAIL: the read failed with errno %s, not EIO" % e.errno)
    if took < 1.0 or took > 15:
        sys.exit("FAIL: the read failed after %.1f s; io_timeout_ms is 2 s"
                 % took)
try:
    h.flush()
    sys.exit("FAIL: FLUSH succeeded with the remote down")
except nbd.Error:
    pass
h.shutdown()
PY

sleep 1
log "restarting nbdkit"
start_nbdkit kit file "$T/remote.img"

# FLUSH until it succeeds (the first may report the failure seen earlier).
"$PYTHON" - "$(uri_unix disk0)" <<'PY' || fail "no FLUSH succeeded after the remote came back"
import nbd, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
end = time.monotonic() + 60
while True:
    try:
        h.flush()
        break
    except nbd.Error as e:
        if time.monotonic() > end:
            sys.exit("FAIL: FLUSH still failing 60 s after the restart: %s" % e)
        time.sleep(0.5)
h.shutdown()
PY
grep -q "remote .* (device 43:0): reconnected" "$LOG" || fail "no reconnection logged"
cmp -n $((40 << 20)) "$T/data" "$T/remote.img" ||
	fail "nbdkit's file differs from what was written: data lost"
assert_alive
