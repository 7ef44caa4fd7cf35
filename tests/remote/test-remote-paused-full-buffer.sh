#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A connection paused by writer throttling with its 128 KiB read buffer
# full must go on when it resumes, not take the full buffer for the
# client's end of file.  Dirty data is held past the throttling midpoint
# (the remote writes slowly), then unaligned writes to uncached pages
# (each needs a page fill on a worker, so its reply and its pause start
# outside the read path) are pipelined with more than 128 KiB queued on
# the socket.  Every write must complete; the connection must survive.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd

start_nbdkit slow --filter=delay memory 96M delay-write=2000ms delay-read=20ms
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")"
write_cache_config 128M 'dirty_background_bytes = "8M"; dirty_bytes = "64M"; dirty_writeback_centisecs = 0;'
add_remote_settings 'io_timeout_ms = 120000; write_behind = false;'
start_wbd

"$PYTHON" - "$(uri_unix disk0)" <<'PY' || fail "see above"
import nbd, os, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
MiB = 1 << 20
for i in range(40):                     # past the throttling midpoint
    h.pwrite(os.urandom(MiB), i * MiB)
ok = 0
def done(err):
    global ok
    if err.value == 0:
        ok += 1
    return 1
buf = nbd.Buffer.from_bytearray(bytearray(os.urandom(48 * 1024 + 512)))
try:
    off = 32 * MiB + 512
    for i in range(600):
        h.aio_pwrite(buf, off, completion=done)
        off += 64 * 1024
        while h.aio_in_flight() >= 32:
            h.poll(-1)
    while h.aio_in_flight() > 0:
        h.poll(-1)
except nbd.Error as e:
    sys.exit("FAIL: the connection was lost after %d writes: %s" % (ok, e))
if ok != 600:
    sys.exit("FAIL: %d of 600 writes succeeded" % ok)
h.shutdown()
PY
! grep -q 'closed the connection mid-request' "$LOG" ||
	fail "wbd took a full read buffer for the client's end of file"
# The data is not what this test checks, and draining it to a remote that
# takes 2 s a write would take half a minute: stop wbd at once.
kill -KILL "$WBD_PID"
wait_exit "$WBD_PID" 10 || fail "wbd still running after SIGKILL"
