#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# NBD_CMD_BLOCK_STATUS with base:allocation, as real clients use it:
#  1. nbdinfo --map of a sparse backing file shows its holes and its data
#     where they are, and qemu-img map agrees;
#  2. a WRITE still in the cache (not written back) is data at once; a TRIM
#     makes a hole; a WRITE_ZEROES over a page still dirty in the cache
#     reads as zeroes there before it is written back (after, it is
#     written zeroes: data, as the backing file says);
#  3. nbdcopy of the sparse export to a file skips the holes: the copy is
#     as sparse as the export, and equal to it.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
need nbdinfo nbdcopy qemu-img cmp

MiB=$((1 << 20))
IMG=$T/disk0.img
truncate -s 64M "$IMG"
head -c 2M /dev/urandom | dd of="$IMG" bs=1M seek=10 conv=notrunc status=none
head -c 4096 /dev/urandom | dd of="$IMG" bs=4096 seek=5000 conv=notrunc status=none
add_export disk0 64M rw "" "$IMG"
# No writeback before the FLUSH below: what is dirty stays in the cache.
write_cache_config 64M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
start_wbd
U=$(uri_unix disk0)

log "1. the backing file's holes and data"
expect_map "$U" base:allocation 0 3 "start of the file"
expect_map "$U" base:allocation $((10 * MiB)) 0 "the 2 MiB written at 10 MiB"
expect_map "$U" base:allocation $((12 * MiB - 1)) 0 "the end of those 2 MiB"
expect_map "$U" base:allocation $((12 * MiB)) 3 "after them"
expect_map "$U" base:allocation $((5000 * 4096)) 0 "the 4 KiB block at 5000"
expect_map "$U" base:allocation $((64 * MiB - 1)) 3 "the last byte"
qemu-img map -f raw --output=json "$U" >"$T/qmap.json" || fail "qemu-img map failed"
"$PYTHON" - "$T/qmap.json" <<'PY' || fail "qemu-img map disagrees (see above)"
import json, sys
m = json.load(open(sys.argv[1]))
def at(o):
    return next(e for e in m if e["start"] <= o < e["start"] + e["length"])
MiB = 1 << 20
assert at(0)["zero"] and not at(0)["data"], at(0)
assert at(10 * MiB)["data"] and not at(10 * MiB)["zero"], at(10 * MiB)
assert at(30 * MiB)["zero"], at(30 * MiB)
PY

log "2. a write, a TRIM and WRITE_ZEROES in the cache"
"$PYTHON" - "$U" <<'PY' || fail "the requests failed"
import nbd, sys
MiB = 1 << 20
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(b"\x11" * 8192, 1 * MiB)             # over a hole
h.trim(MiB, 10 * MiB)                           # half the data
h.pwrite(b"\x22" * 4096, 30 * MiB)              # dirty ...
h.zero(4096, 30 * MiB)                          # ... then zeroed
h.pwrite(b"\x33" * 4096, 11 * MiB)              # dirty over data ...
h.zero(4096, 11 * MiB, nbd.CMD_FLAG_NO_HOLE)    # ... zeroed, no hole
h.shutdown()
PY
[[ $("$WBCTL" -s "$T/control.sock" status --json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["exports"][0]["dirty_bytes"])') -gt 0 ]] ||
	fail "nothing is dirty: the test would not test the cache"
expect_map "$U" base:allocation $((1 * MiB)) 0 "8 KiB written, in the cache only"
expect_map "$U" base:allocation $((1 * MiB + 8192)) 3 "after the write"
expect_map "$U" base:allocation $((10 * MiB)) 3 "the TRIMmed MiB"
expect_map "$U" base:allocation $((30 * MiB)) 3 "zeroed over a dirty page, over a hole"
[[ $(( $(map_flags "$U" $((11 * MiB))) & 2 )) == 2 ]] ||
	fail "WRITE_ZEROES (NO_HOLE) over a dirty page does not read as zero"
expect_map "$U" base:allocation $((11 * MiB + 4096)) 0 "data next to it"

log "... and after a FLUSH"
"$PYTHON" -c 'import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1]); h.flush(); h.shutdown()' "$U"
expect_map "$U" base:allocation $((1 * MiB)) 0 "the 8 KiB written back"
expect_map "$U" base:allocation $((10 * MiB)) 3 "the TRIMmed MiB, written back"

log "3. nbdcopy keeps it sparse"
nbdcopy "$U" "$T/copy.img" || fail "nbdcopy failed"
cmp "$IMG" "$T/copy.img" || fail "the copy differs from the backing file"
alloc_kib=$(( $(stat -c '%b * %B' "$T/copy.img") / 1024 ))
log "the copy allocates $alloc_kib KiB of 65536"
((alloc_kib < 8192)) || fail "the copy allocates $alloc_kib KiB: the holes were copied"
assert_alive
