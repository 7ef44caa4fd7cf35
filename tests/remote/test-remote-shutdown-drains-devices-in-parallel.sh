#!/usr/bin/env bash
# SIGTERM writes every device back at once: with a remote export whose
# server is gone (listed first, so a one-at-a-time drain would retry it
# for about 15 s before anything else), a file export's dirty data is on
# its backing file within seconds of the signal while wbd is still trying
# the dead remote; wbd then exits 1 and says which data it could not
# write.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need cmp

start_nbdkit kit memory 16M
KIT=$KIT_PID
add_remote_export gone "$(kit_uri "$KIT_SOCK")"
add_export_mode local 8M writeback
write_cache_config 64M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
add_remote_settings 'reconnect_max_ms = 200;'
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
wait_exit "$WBD_PID" 60 || fail "wbd still running 60 s after SIGTERM"
[[ $EXIT_STATUS == 1 ]] || fail "wbd exited $EXIT_STATUS with data it could not write, expected 1"
grep -q 'SHUTDOWN WITH DATA NOT WRITTEN BACK: export "gone"' "$LOG" ||
	fail "the log does not name the export whose data was lost: $(tail -5 "$LOG")"
