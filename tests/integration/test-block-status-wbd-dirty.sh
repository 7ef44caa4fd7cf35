#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The wbd:dirty metadata context shows what only the cache holds:
#  1. nbdinfo --map=wbd:dirty shows a range written without FLUSH as dirty
#     (1), and nothing else;
#  2. libnbd with both contexts selected gets one chunk of each per
#     request, and with REQ_ONE exactly one extent each, within the length
#     asked for;
#  3. after a FLUSH, nothing is dirty.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
need nbdinfo

MiB=$((1 << 20))
add_export disk0 32M rw
write_cache_config 64M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
start_wbd
U=$(uri_unix disk0)

expect_map "$U" wbd:dirty 0 0 "a fresh export"
"$PYTHON" -c 'import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
h.pwrite(b"\x01" * 12288, (3 << 20) + 4096); h.shutdown()' "$U"

log "1. the written range is dirty, nothing else"
expect_map "$U" wbd:dirty $((3 * MiB)) 0 "the page before the write"
expect_map "$U" wbd:dirty $((3 * MiB + 4096)) 1 "the write's first page"
expect_map "$U" wbd:dirty $((3 * MiB + 16383)) 1 "the write's last byte"
expect_map "$U" wbd:dirty $((3 * MiB + 16384)) 0 "the page after the write"
expect_map "$U" wbd:dirty $((32 * MiB - 1)) 0 "the end of the export"

log "2. both contexts at once, and REQ_ONE"
"$PYTHON" - "$U" <<'PY' || fail "block status through libnbd (see above)"
import nbd, sys
MiB = 1 << 20
h = nbd.NBD()
h.add_meta_context("base:allocation")
h.add_meta_context("wbd:dirty")
h.connect_uri(sys.argv[1])
assert h.can_meta_context("base:allocation") and h.can_meta_context("wbd:dirty")
got = {}
def cb(ctx, off, entries, err):
    assert ctx not in got, "two chunks for " + ctx
    got[ctx] = list(zip(entries[0::2], entries[1::2]))
h.block_status(8 * MiB, 0, cb)
assert set(got) == {"base:allocation", "wbd:dirty"}, got
d = got["wbd:dirty"]
assert d[:3] == [(3 * MiB + 4096, 0), (12288, 1), (8 * MiB - 3 * MiB - 16384, 0)], d
assert sum(n for n, _ in got["base:allocation"]) == 8 * MiB, got
got.clear()
h.block_status(1 << 20, 3 * MiB + 8192, cb, nbd.CMD_FLAG_REQ_ONE)
assert got["wbd:dirty"] == [(8192, 1)], got
assert len(got["base:allocation"]) == 1 and got["base:allocation"][0][0] <= MiB, got
got.clear()
h.block_status(100, 3 * MiB, cb, nbd.CMD_FLAG_REQ_ONE)
assert got["wbd:dirty"] == [(100, 0)], got
h.shutdown()
PY

log "3. after a FLUSH nothing is dirty"
"$PYTHON" -c 'import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1]); h.flush(); h.shutdown()' "$U"
[[ $(nbdinfo --map=wbd:dirty "$U") =~ ^\ *0\ +$((32 * MiB))\ +0 ]] ||
	fail "still dirty after FLUSH: $(nbdinfo --map=wbd:dirty "$U")"
assert_alive
