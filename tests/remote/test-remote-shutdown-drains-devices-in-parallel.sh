#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# SIGTERM writes every device back at once: with a remote export whose
# server is gone (listed first, so a one-at-a-time drain would retry it
# before anything else), a file export's dirty data is on its backing
# file within seconds of the signal while wbd is still trying the dead
# remote.  wbd never gives the remote's data up: it keeps trying (logging
# each attempt), and once a server is back on the socket it writes it
# there and exits 0.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need cmp

start_nbdkit kit memory 16M
KIT=$KIT_PID
add_remote_export gone "$(kit_uri "$KIT_SOCK")"
add_export_mode local 8M writeback
write_cache_config 64M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
add_remote_settings 'reconnect_max_ms = 200; write_behind = false;'
start_wbd

head -c 4M /dev/urandom >"$T/data"
"$PYTHON" - "$(uri_unix gone)" "$(uri_unix local)" "$T/data" "$T/local.img" <<'PY' || fail "see above"
import nbd, sys
uri_gone, uri_local, data_path, img = sys.argv[1:5]
data = open(data_path, "rb").read()
for uri in (uri_gone, uri_local):
    h = nbd.NBD()
    h.connect_uri(uri)
    h.pwrite(data, 0)
    h.shutdown()                # no FLUSH: the data stays dirty
if open(img, "rb").read(len(data)) == data:
    sys.exit("FAIL: the data reached the file before SIGTERM; this test "
             "cannot see the drain")
PY
stop_kit "$KIT" KILL

kill -TERM "$WBD_PID"
for ((i = 0; i < 80; i++)); do
	cmp -s -n $((4 << 20)) "$T/data" "$T/local.img" && break
	sleep 0.1
done
((i < 80)) || fail "the file export was not written back within 8 s of SIGTERM"
proc_alive "$WBD_PID" ||
	fail "wbd had already exited: this test could not tell a parallel drain"
# Still trying after three failed attempts (1 + 2 s apart), saying so.
rc=0
wait_log 20 'stopping: export "gone" .*(attempt 3); trying again' "$WBD_PID" || rc=$?
((rc != 2)) || fail "wbd exited with the remote's data unwritten: $(tail -5 "$LOG")"
((rc == 0)) || fail "no third drain attempt logged within 20 s: $(tail -5 "$LOG")"
sleep 1
proc_alive "$WBD_PID" || fail "wbd gave up the remote's dirty data: $(tail -5 "$LOG")"

# The remote back (empty, the same size): the drain writes it there.
start_nbdkit kit memory 16M
wait_exit "$WBD_PID" 60 || fail "wbd still running 60 s after the remote came back"
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited $EXIT_STATUS after writing everything back, expected 0"
grep -q 'shutdown complete: all dirty data written back and flushed' "$LOG" ||
	fail "no 'shutdown complete' line: $(tail -5 "$LOG")"
"$PYTHON" - "$(kit_uri "$KIT_SOCK")" "$T/data" <<'PY' || fail "see above"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = open(sys.argv[2], "rb").read()
if h.pread(len(data), 0) != data:
    sys.exit("FAIL: the remote does not hold the data written before SIGTERM")
PY
