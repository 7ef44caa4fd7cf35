#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A remote that keeps to the letter of multi-conn (weak-multiconn.py: a
# write without FUA is seen on other connections only once a FLUSH on any
# connection has covered it) behind a cache too small to hold what is
# written: writeback puts the data on one of libnbd's connections, the
# pages are evicted, and the misses read it back on others (the read
# connection among them).  Block status must show it all as data, and
# every byte must read back as written: with
# writeback's commits (the default), and with none
# (commit_interval_ms = 0), where each miss of an unflushed range must
# FLUSH first.  The remote is checked first to really hide unflushed
# writes from other connections, so the test can fail.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl
nbdkit python --version >/dev/null 2>&1 ||
	skip "nbdkit's python plugin (nbdkit-plugin-python) is not installed"

PLUGIN=$SRCDIR/weak-multiconn.py
SIZE=$((48 << 20))

# 0. The remote itself: a write on one connection is not seen on another
# until a FLUSH on either.
start_nbdkit weak python "$PLUGIN" size=$SIZE
"$PYTHON" - "$(kit_uri "$KIT_SOCK")" <<'PY' || fail "the remote does not behave as weak multi-conn"
import nbd, sys
a, b = nbd.NBD(), nbd.NBD()
a.connect_uri(sys.argv[1]); b.connect_uri(sys.argv[1])
assert a.can_multi_conn() and a.can_flush()
a.pwrite(b"\x5a" * 4096, 0)
assert a.pread(4096, 0) == b"\x5a" * 4096, "a does not read its own write"
assert b.pread(4096, 0) == bytes(4096), "b sees a's write before a FLUSH"
b.flush()
assert b.pread(4096, 0) == b"\x5a" * 4096, "b does not see it after a FLUSH"
PY
stop_kit "$KIT_PID"

# write_then_verify ROUND: write SIZE bytes through wbd (each 4 KiB block
# tagged with its index and ROUND, no FLUSH), wait until it is all
# written back, then read it all back (misses: the cache is 8 MiB) and
# compare.
write_then_verify() {
	"$PYTHON" - "$(uri_unix disk0)" "$SIZE" "$1" write <<'PY' || fail "round $1: writing"
import nbd, struct, sys
uri, size, rnd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
h = nbd.NBD()
h.connect_uri(uri)
for off in range(0, size, 1 << 20):
    h.pwrite(b"".join(struct.pack("<QQ", (off >> 12) + i, rnd) * 256
                      for i in range(256)), off)
h.shutdown()
PY
	wait_clean 30
	# Block status first (reads would flush): written means data, not
	# a hole a copy would skip.
	"$PYTHON" - "$(uri_unix disk0)" "$SIZE" <<'PY' || fail "round $1: block status"
import nbd, sys
uri, size = sys.argv[1], int(sys.argv[2])
h = nbd.NBD()
h.add_meta_context("base:allocation")
h.connect_uri(uri)
pos, holes = 0, []
while pos < size:
    got = []
    h.block_status(size - pos, pos,
                   lambda ctx, off, ext, err: got.extend(ext) if ctx == "base:allocation" else None)
    for i in range(0, len(got), 2):
        if got[i + 1] & nbd.STATE_HOLE:
            holes.append((pos, got[i]))
        pos += got[i]
h.shutdown()
if holes:
    sys.exit("FAIL: written ranges reported as holes: %s" % holes[:5])
PY
	"$PYTHON" - "$(uri_unix disk0)" "$SIZE" "$1" <<'PY' || fail "round $1: reading back"
import nbd, struct, sys
uri, size, rnd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
h = nbd.NBD()
h.connect_uri(uri)
bad = 0
for off in range(0, size, 1 << 20):
    data = h.pread(1 << 20, off)
    for i in range(256):
        want = struct.pack("<QQ", (off >> 12) + i, rnd) * 256
        if data[i << 12:(i + 1) << 12] != want:
            if bad < 5:
                got = struct.unpack_from("<QQ", data, i << 12)
                print("block %d reads as (block, round) %s, not (%d, %d)"
                      % ((off >> 12) + i, got, (off >> 12) + i, rnd))
            bad += 1
h.shutdown()
if bad:
    sys.exit("FAIL: %d of %d blocks read back stale" % (bad, size >> 12))
PY
}

for commit in 50 0; do
	start_nbdkit weak python "$PLUGIN" size=$SIZE
	kit=$KIT_PID
	_EXPORTS=()
	add_remote_export disk0 "$(kit_uri "$KIT_SOCK")"
	write_cache_config 8M 'dirty_expire_centisecs = 20; dirty_writeback_centisecs = 10;'
	add_remote_settings "commit_interval_ms = $commit;"
	start_wbd
	write_then_verify 1
	write_then_verify 2
	log "commit_interval_ms = $commit: $((SIZE >> 20)) MiB written, written back, read back whole twice ($(remote_field flushes_before_read) misses flushed first)"
	if ((commit == 0)); then
		(($(remote_field flushes_before_read) > 0)) || fail "with no commits, no miss flushed first"
	fi
	assert_alive
	stop_wbd
	stop_kit "$kit"
done
