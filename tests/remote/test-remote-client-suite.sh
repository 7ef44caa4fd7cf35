#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The foundation client suite through a wbd export backed by "nbdkit
# memory" (96 MiB behind a 32 MiB cache, so reads after eviction come from
# the remote).  A local shadow file follows every write: nbdinfo's size and
# flags; nbdcopy round trips (one connection in, four out, four in);
# qemu-img compare and convert (qcow2 in, raw out) over the nbd+unix URI;
# qemu-io unaligned pattern writes and reads; fio with bs 512..128k and
# crc32c verification.  Last, 2 MiB written in odd pieces are not on nbdkit
# until a FLUSH (on another connection); after it nbdkit itself, read
# directly and not through wbd, holds exactly the shadow.  A kernel nbd-client pass runs if
# /dev/nbd0 and nbd-client are usable here; otherwise it alone is skipped.
# (test-remote-client-basics.sh covers nbdinfo's full flag list, a
# read-only and a no-fast-zero remote, fio 4k/64k and a cold restart.)
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need nbdinfo nbdcopy qemu-img qemu-io fio
fio --enghelp 2>/dev/null | grep -qw nbd || skip "this fio has no nbd engine"
need_python_nbd

MIB=$((1 << 20))
SIZE=$((96 * MIB))
start_nbdkit mem memory "$SIZE"
MEM=$KIT_SOCK
add_remote_export disk0 "$(kit_uri "$MEM")"
write_cache_config 32M 'dirty_background_ratio = 10; dirty_ratio = 30; dirty_writeback_centisecs = 0;'
# Dirty data waits for a FLUSH: no write-behind.
add_remote_settings 'write_behind = false;'
start_wbd
URI=$(uri_unix disk0)
SHADOW=$T/shadow
truncate -s "$SIZE" "$SHADOW"

# put_shadow FILE OFFSET: copy FILE into the shadow at OFFSET.
put_shadow() {
	dd if="$1" of="$SHADOW" bs=64K seek="$2" oflag=seek_bytes conv=notrunc \
		status=none
}

# check_whole WHAT: the export read through wbd equals the shadow.
check_whole() {
	rm -f "$T/whole"
	nbdcopy --connections=4 "$URI" "$T/whole" || fail "$1: nbdcopy out failed"
	cmp "$SHADOW" "$T/whole" || fail "$1: the export differs from the shadow"
}

log "nbdinfo"
[[ $(nbdinfo --size "$URI") == "$SIZE" ]] || fail "nbdinfo --size: not the remote's $SIZE"
for cap in flush fua trim zero multi-conn; do
	nbdinfo --can "$cap" "$URI" || fail "nbdinfo: the export cannot $cap"
done
nbdinfo --is readonly "$URI" && fail "nbdinfo: the export is read-only"

log "nbdcopy: one connection in, four out"
head -c "$SIZE" /dev/urandom >"$T/rand"
nbdcopy --connections=1 --flush "$T/rand" "$URI" || fail "nbdcopy in failed"
cp "$T/rand" "$SHADOW"
check_whole "nbdcopy round trip"

log "qemu-img compare and convert"
qemu-img compare -q -f raw -F raw "$SHADOW" "$URI" ||
	fail "qemu-img compare: the export differs from the shadow"
# A qcow2 image with data, a zeroed range and a hole, converted into the
# first 24 MiB of the export (-n: the export exists).
qemu-img create -q -f qcow2 "$T/src.qcow2" 24M
qemu-io -f qcow2 -c 'write -P 0x5c 0 3M' -c 'write -P 0xc5 5000k 777k' \
	-c 'write -z 9M 2M' -c 'write -P 0x7e 20M 4M' "$T/src.qcow2" >/dev/null ||
	fail "qemu-io could not fill the qcow2 image"
qemu-img convert -n -f qcow2 -O raw "$T/src.qcow2" "$URI" ||
	fail "qemu-img convert qcow2 -> the export failed"
qemu-img convert -f qcow2 -O raw "$T/src.qcow2" "$T/src.raw"
put_shadow "$T/src.raw" 0
qemu-img compare -q -f raw -F raw "$SHADOW" "$URI" ||
	fail "qemu-img compare after convert: the export differs from the shadow"
qemu-img convert -f raw -O raw "$URI" "$T/conv.raw" ||
	fail "qemu-img convert the export -> raw failed"
cmp "$SHADOW" "$T/conv.raw" || fail "qemu-img convert out: differs from the shadow"
# compare must notice a difference (one byte in the shadow's copy).
cp "$SHADOW" "$T/changed"
# (The byte is flipped, not set: random data may already hold any value.)
"$PYTHON" - "$T/changed" $((50 * MIB + 3)) <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    b = f.read(1)[0]
    f.seek(int(sys.argv[2]))
    f.write(bytes([b ^ 0xff]))
PY
if qemu-img compare -q -f raw -F raw "$T/changed" "$URI"; then
	fail "qemu-img compare found no difference where there is one"
fi

log "qemu-io unaligned patterns"
# PATTERN OFFSET LENGTH: odd offsets and lengths, across pages, across
# 1 MiB boundaries, 1 byte, the last byte of the export.
PATTERNS=(
	"0x11 513 1000"
	"0x22 4095 2"
	"0x33 $((30 * MIB - 100)) 300"
	"0x44 $((40 * MIB + 1)) $((3 * MIB + 4093))"
	"0x55 $((60 * MIB + 7)) 1"
	"0x66 $((SIZE - 4097)) 4097"
	"0x77 $((70 * MIB + 2049)) 12345"
	"0x88 $((70 * MIB + 8000)) 100"
)
args=()
for p in "${PATTERNS[@]}"; do
	read -r pat off len <<<"$p"
	args+=(-c "write -P $pat $off $len")
done
for p in "${PATTERNS[@]}"; do
	read -r pat off len <<<"$p"
	# 0x77 is overlapped by 0x88 at its end; read the untouched part.
	[[ $pat == 0x77 ]] && len=$((8000 - 2049))
	args+=(-c "read -P $pat $off $len")
done
out=$(qemu-io -f raw "${args[@]}" "$URI" 2>&1) || fail "qemu-io failed: $out"
grep -Eqi 'verification failed|error|failed' <<<"$out" && fail "qemu-io: $out"
"$PYTHON" - "$SHADOW" "${PATTERNS[@]}" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    for p in sys.argv[2:]:
        pat, off, n = p.split()
        f.seek(int(off))
        f.write(bytes([int(pat, 16)]) * int(n))
PY
# The bytes next to each pattern are still the shadow's (a new connection).
args=()
for off in 512 1513 4094 4097 $((40 * MIB)) $((60 * MIB + 6)) $((60 * MIB + 8)); do
	b=$(od -An -tx1 -j "$off" -N1 "$SHADOW" | tr -d ' ')
	args+=(-c "read -P 0x$b $off 1")
done
out=$(qemu-io -f raw "${args[@]}" "$URI" 2>&1) || fail "qemu-io failed: $out"
grep -Eqi 'verification failed|error|failed' <<<"$out" &&
	fail "qemu-io: the bytes next to a pattern changed: $out"
check_whole "qemu-io patterns"

log "fio randwrite, bs 512..128k, crc32c verify"
if ! fio --name=suite --ioengine=nbd --uri="$URI" --rw=randwrite \
	--offset=$((72 * MIB)) --size=$((16 * MIB)) --bsrange=512-128k \
	--blockalign=512 --iodepth=16 --verify=crc32c --verify_fatal=1 \
	--do_verify=1 --verify_state_save=0 --output="$T/fio.out" \
	>/dev/null 2>"$T/fio.err"; then
	fail "fio found corrupted data or failed: $(cat "$T/fio.err" "$T/fio.out")"
fi
grep -q 'err= 0' "$T/fio.out" || fail "fio reported an error: $(cat "$T/fio.out")"
# fio's data (verified by fio itself) becomes the shadow of its region.
"$PYTHON" - "$URI" $((72 * MIB)) $((16 * MIB)) "$T/fio-region" <<'PY'
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
open(sys.argv[4], "wb").write(h.pread(int(sys.argv[3]), int(sys.argv[2])))
h.shutdown()
PY
cmp -s "$T/fio-region" <(head -c $((16 * MIB)) <(tail -c +$((72 * MIB + 1)) "$SHADOW")) &&
	fail "fio's region is unchanged: fio wrote nothing"
put_shadow "$T/fio-region" $((72 * MIB))

log "nbdcopy --connections=4 in"
head -c $((20 * MIB)) /dev/urandom >"$T/rand2"
nbdcopy --connections=4 --flush "$T/rand2" "$URI" ||
	fail "nbdcopy --connections=4 in failed"
# nbdcopy writes the whole source from offset 0.
put_shadow "$T/rand2" 0
check_whole "nbdcopy --connections=4"

log "unflushed writes, FLUSH on another connection, then nbdkit read directly"
# 2 MiB in odd pieces, below the background threshold and with periodic
# writeback off: only the FLUSH can take them to nbdkit.
head -c $((2 * MIB)) /dev/urandom >"$T/late"
"$PYTHON" - "$URI" "$(kit_uri "$MEM")" "$T/late" "$SHADOW" <<'PY' || fail "see above"
import nbd, sys
uri, kit_uri, late, shadow = sys.argv[1:5]
data = open(late, "rb").read()
pieces = [(90 << 20) + 3, (91 << 20) + 4097, (92 << 20) + 511]
h = nbd.NBD()
h.connect_uri(uri)
kit = nbd.NBD()
kit.connect_uri(kit_uri)
n = len(data) // 3
with open(shadow, "r+b") as f:
    for i, off in enumerate(pieces):
        h.pwrite(data[i * n:(i + 1) * n], off)
        f.seek(off)
        f.write(data[i * n:(i + 1) * n])
        if kit.pread(n, off) == data[i * n:(i + 1) * n]:
            sys.exit("FAIL: a write reached nbdkit before any FLUSH")
h.shutdown()
f = nbd.NBD()
f.connect_uri(uri)
f.flush()
f.shutdown()
kit.shutdown()
PY
nbdcopy "$(kit_uri "$MEM")" "$T/remote" || fail "nbdcopy from nbdkit failed"
cmp "$SHADOW" "$T/remote" || fail "after FLUSH nbdkit's data differs from the shadow"
qemu-img compare -q -f raw -F raw "$SHADOW" "$(kit_uri "$MEM")" ||
	fail "qemu-img compare: nbdkit differs from the shadow"

# The kernel's NBD client, if this machine lets us use it.
if kernel_nbd_reason=$(kernel_nbd_unusable); then
	log "kernel nbd-client pass skipped: $kernel_nbd_reason"
else
	log "kernel nbd-client pass on /dev/nbd0"
	nbd-client -N disk0 -unix "$SOCK" /dev/nbd0 >"$T/nbd-client.log" 2>&1 ||
		fail "nbd-client could not connect /dev/nbd0: $(cat "$T/nbd-client.log")"
	kdone() { nbd-client -d /dev/nbd0 >/dev/null 2>&1 || true; }
	head -c $((8 * MIB)) /dev/urandom >"$T/kdata"
	if ! dd if="$T/kdata" of=/dev/nbd0 bs=1M seek=80 oflag=direct conv=fsync status=none; then
		kdone
		fail "writing /dev/nbd0 failed"
	fi
	if ! dd if=/dev/nbd0 of="$T/kback" bs=1M skip=80 count=8 iflag=direct status=none; then
		kdone
		fail "reading /dev/nbd0 failed"
	fi
	kdone
	cmp "$T/kdata" "$T/kback" || fail "/dev/nbd0 read back differs"
	put_shadow "$T/kdata" $((80 * MIB))
	remote_read "$MEM" 0 "$SIZE" "$T/remote"
	cmp "$SHADOW" "$T/remote" || fail "after the kernel client's fsync nbdkit differs"
fi
assert_alive
