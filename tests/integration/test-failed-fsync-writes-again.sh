#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A failed flush of a local file (fdatasync: EIO) may have lost everything
# written back since the last good one -- the kernel marks the pages it
# could not write clean and reports the error once -- so wbd dirties those
# ranges again where its cache holds them, and the next FLUSH writes them
# again before it flushes.  The backing file is on a FUSE mount (nbdfuse)
# of an nbdkit python plugin whose flush fails while $T/fail exists and
# then drops every write since the last good flush (failing-flush.py).
# 8M written and flushed; 4M more written; the FLUSH fails (EIO, with the
# plugin's copy of those 4M gone); the failure cleared, a FLUSH succeeds
# and the device's stable copy must hold all 12M.  Without the redo the
# second FLUSH found nothing dirty and the 4M were lost.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
nbdkit python --version >/dev/null 2>&1 ||
	skip "nbdkit's python plugin is not installed"

start_fuse_file "$T/fuse" python "$SRCDIR/failing-flush.py" \
	file="$T/stable.img" size=$((16 << 20)) fail="$T/fail"
add_export_mode disk0 16M writeback "$FUSE_FILE"
write_cache_config 64M 'dirty_writeback_centisecs = 0; dirty_background_ratio = 90; dirty_ratio = 95;'
start_wbd

"$PYTHON" - "$(uri_unix disk0)" "$T/stable.img" "$T/fail" <<'PY' || fail "see above"
import nbd, os, sys, time
uri, stable, failfile = sys.argv[1:4]
MiB = 1 << 20
h = nbd.NBD()
h.connect_uri(uri)
shadow = bytearray(16 * MiB)

def write(off, n):
    buf = os.urandom(n)
    h.pwrite(buf, off)
    shadow[off:off + n] = buf

write(0, 8 * MiB)
h.flush()
with open(stable, "rb") as f:
    if f.read() != shadow:
        sys.exit("FAIL: after a good FLUSH the device's stable copy differs")

write(6 * MiB, 4 * MiB)
open(failfile, "w").close()
try:
    h.flush()
    sys.exit("FAIL: FLUSH succeeded while the device's flush failed")
except nbd.Error as e:
    if e.errno != "EIO":
        sys.exit("FAIL: failed FLUSH answered %s, not EIO" % e.errno)
os.unlink(failfile)

# The error is reported; then FLUSHes succeed again.
for attempt in range(3):
    try:
        h.flush()
        break
    except nbd.Error as e:
        print("FLUSH after the failure: %s (attempt %d)" % (e, attempt + 1))
else:
    sys.exit("FAIL: FLUSH still fails after the device recovered")
with open(stable, "rb") as f:
    data = f.read()
if data != shadow:
    lost = sum(1 for p in range(0, len(shadow), 4096)
               if data[p:p + 4096] != shadow[p:p + 4096])
    sys.exit("FAIL: %d KiB written before the failed flush are not on the "
             "device after a good one: not written again" % (lost * 4))
# The cache still serves them too.
if h.pread(16 * MiB, 0) != bytes(shadow):
    sys.exit("FAIL: reads through wbd differ from what was written")
h.shutdown()
PY

again=$("$WBCTL" -s "$T/control.sock" --json status |
	jq '[.devices[].rewritten_after_failed_flush_bytes] | add')
((again >= 4 << 20)) ||
	fail "status counts $again bytes written again after the failed flush, expected at least 4M"
grep -q "dirtied again, to be written again" "$LOG" ||
	fail "the log does not say the failed flush's pages are written again"
assert_alive
