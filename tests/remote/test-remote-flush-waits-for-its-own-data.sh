#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A FLUSH over a slow remote waits for its own export's data only: two
# exports on one nbdkit (one writeback device, one window), a backlog of
# 4 MiB of scattered pages on "big" being written back (write-behind,
# 100 ms a write, one thread per connection: about 80 writes a second, so
# some 13 s of work), and a FLUSH of 64 KiB on "small".  The FLUSH takes
# the device's window before the backlog's next writes (syncs first), so
# it is answered after the backlog's writes in flight and its own, while
# most of the backlog is still to write; then the backlog drains and
# nbdkit holds both.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl

start_nbdkit slow --threads=1 --filter=delay memory 64M delay-write=100ms
SLOW=$KIT_SOCK
add_remote_export big "$(kit_uri "$SLOW" big)"
add_remote_export small "$(kit_uri "$SLOW" small)"
write_cache_config 256M 'dirty_background_ratio = 50; dirty_ratio = 60; dirty_expire_centisecs = 3000;'
start_wbd

# unwritten EXPORT: its bytes dirty or under writeback.
unwritten() {
	remote_wbctl status --json | "$PYTHON" -c 'import json, sys
e = [e for e in json.load(sys.stdin)["exports"] if e["name"] == sys.argv[1]][0]
print(e["dirty_bytes"] + e["writeback_bytes"])' "$1"
}

# The backlog: 1024 scattered pages in [0, 8M) of big (nbdkit's memory
# is one for both names: small writes at 32M).  No FLUSH.
write_scattered_pages "$(uri_unix big)" "$T/img-big" 3 1024 8 1 ||
	fail "the backlog's writes failed"
before=$(unwritten big)
((before >= 3 << 20)) ||
	fail "only $before bytes of the backlog were left to write (a fast machine?)"

# The FLUSH on small, timed; then what is left of big's backlog.
t=$("$PYTHON" - "$(uri_unix small)" "$T/img-small" <<'PY'
import nbd, os, sys, time
uri, out = sys.argv[1:3]
buf = os.urandom(64 << 10)
h = nbd.NBD()
h.connect_uri(uri)
h.pwrite(buf, 32 << 20)
t0 = time.monotonic()
h.flush()
print("%.2f" % (time.monotonic() - t0))
h.shutdown()
open(out, "wb").write(buf)
PY
) || fail "the FLUSH on small failed"
left=$(unwritten big)
log "FLUSH on small: $t s; big had $before bytes to write before, $left after"
# Its own 16 pages and the backlog's writes in flight: a few round trips
# of 100 ms.  The backlog needs some 13 s: half of it must be left.
((left >= before / 2)) ||
	fail "the FLUSH on small returned after $t s, with big's backlog down from $before to $left bytes: it waited for big's data"
"$PYTHON" -c 'import sys; sys.exit(float(sys.argv[1]) >= 5)' "$t" ||
	fail "the FLUSH on small took $t s"
remote_read "$SLOW" $((32 << 20)) $((64 << 10)) "$T/remote-small"
cmp "$T/img-small" "$T/remote-small" || fail "nbdkit does not hold small's FLUSHed data"

wait_clean 60
remote_read "$SLOW" 0 $((8 << 20)) "$T/remote-big"
cmp "$T/img-big" "$T/remote-big" || fail "nbdkit does not hold big's backlog"
