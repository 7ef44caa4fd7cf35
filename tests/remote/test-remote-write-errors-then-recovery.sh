#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# nbdkit's error filter fails every write while a trigger file exists.
# Meanwhile FLUSH through wbd reports EIO, again and again, and wbd keeps
# the data dirty; once the errors stop a FLUSH succeeds and nbdkit holds
# exactly what was written.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd

truncate -s 32M "$T/remote.img"
ERRS=$T/errors-on
start_nbdkit kit --filter=error file "$T/remote.img" \
	error-pwrite=EIO error-pwrite-rate=100% error-pwrite-file="$ERRS"
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")"
write_cache_config 64M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 20; dirty_expire_centisecs = 0;'
start_wbd

head -c 8M /dev/urandom >"$T/data"
touch "$ERRS"
"$PYTHON" - "$(uri_unix disk0)" "$T/data" "$ERRS" <<'PY' || fail "see above"
import nbd, os, sys, time
uri, path, errs = sys.argv[1:4]
data = open(path, "rb").read()
h = nbd.NBD()
h.connect_uri(uri)
for off in range(0, len(data), 1 << 20):
    h.pwrite(data[off:off + (1 << 20)], off)
# Every FLUSH fails while the errors last (writeback retries meanwhile).
for i in range(3):
    try:
        h.flush()
        sys.exit("FAIL: FLUSH %d succeeded while every write fails" % i)
    except nbd.Error as e:
        if e.errno not in (None, 5, "EIO"):
            sys.exit("FAIL: FLUSH failed with %s, not EIO" % e.errno)
    time.sleep(0.3)
# The data is still readable (from the cache) while it cannot be written.
if h.pread(len(data), 0) != data:
    sys.exit("FAIL: data reads back wrong while writeback fails")
os.unlink(errs)
end = time.monotonic() + 60
while True:
    try:
        h.flush()
        break
    except nbd.Error as e:
        if time.monotonic() > end:
            sys.exit("FAIL: FLUSH still failing 60 s after errors stopped")
        time.sleep(0.3)
h.shutdown()
PY
cmp -n $((8 << 20)) "$T/data" "$T/remote.img" ||
	fail "nbdkit's file differs after the errors stopped and FLUSH succeeded"
grep -q 'writeback of .* failed; the data stays dirty' "$LOG" ||
	fail "no writeback failure logged"
grep -q 'disconnected' "$LOG" && fail "a write error was taken for a disconnection"
assert_alive
