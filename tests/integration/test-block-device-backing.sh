#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A block device as backing (a loop device here): its own MAJ:MIN as the
# writeback device (flush-7:N), its size from BLKGETSIZE64, data written
# back to it, WRITE_ZEROES and TRIM through the block ioctls.  Then
# direct = true (O_DIRECT) on a loop device of 4 KiB logical blocks, with
# an export that ends mid-block: the data is on the device after FLUSH and
# reads back from a cold cache, WRITE_ZEROES at unaligned offsets (which
# BLKZEROOUT refuses, so zeroes are written through the bounce buffer)
# leaves its neighbours alone, and so does the read-modify-write of the
# export's last block to the bytes past its end.  Skips (77) where no loop
# device can be set up (not root, no loop driver).
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need nbdinfo
need qemu-io

truncate -s 32M "$T/loop.img"
attach_loop LOOPDEV "$T/loop.img" || skip "cannot set up a loop device here"

majmin=$(printf '%d:%d' "0x$(stat -c '%t' "$LOOPDEV")" "0x$(stat -c '%T' "$LOOPDEV")")
log "loop device $LOOPDEV is $majmin"

# No size in the config: it comes from the device.
_EXPORTS=("  { name = \"blk\"; backing = \"$LOOPDEV\"; }")
write_cache_config 16M 'dirty_writeback_centisecs = 0;'
start_wbd

size=$(nbdinfo --size "$(uri_unix blk)") || fail "nbdinfo failed"
[[ $size == $((32 << 20)) ]] || fail "size $size, expected the device's 32 MiB"

thread_names "$WBD_PID" | grep -qx "flush-$majmin" ||
	fail "no flush-$majmin thread: $(thread_names "$WBD_PID" | tr '\n' ' ')"

head -c 4M /dev/urandom >"$T/data"
nbdcopy --flush "$T/data" "$(uri_unix blk)" || fail "nbdcopy into the device failed"
cmp -n $((4 << 20)) "$T/data" "$LOOPDEV" || fail "the device does not hold the data after FLUSH"

qemu-io -f raw "$(uri_unix blk)" -c 'write -z 0 1M' -c 'discard 1M 1M' -c 'flush' >/dev/null ||
	fail "qemu-io write -z / discard failed"
cmp -n $((1 << 20)) "$LOOPDEV" /dev/zero || fail "WRITE_ZEROES did not zero the device"
cmp -n $((2 << 20)) -i $((2 << 20)) "$T/data" "$LOOPDEV" ||
	fail "data beyond the zeroed and trimmed range changed"

stop_wbd
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with status $EXIT_STATUS after SIGTERM, expected 0"

# direct = true, on 4 KiB logical blocks where losetup can make them.
log "direct = true"
head -c 32M /dev/urandom >"$T/loop2.img"
cp "$T/loop2.img" "$T/before"
attach_loop LOOPDEV2 "$T/loop2.img" -b 4096 ||
	attach_loop LOOPDEV2 "$T/loop2.img" ||
	fail "cannot set up a second loop device"
lbs=$(cat "/sys/block/${LOOPDEV2##*/}/queue/logical_block_size")
size=$(( (16 << 20) + 1000 ))
log "loop device $LOOPDEV2 has $lbs-byte logical blocks; export size $size"
_EXPORTS=("  { name = \"blk\"; backing = \"$LOOPDEV2\"; size = $size; direct = true; }")
write_cache_config 16M 'dirty_writeback_centisecs = 0;'
start_wbd
grep -q "$LOOPDEV2: opened with O_DIRECT, transfers aligned to $lbs bytes" "$LOG" ||
	fail "the log does not say that $LOOPDEV2 is opened with O_DIRECT, aligned to $lbs"
grep -q "export \"blk\": block device $LOOPDEV2 (O_DIRECT)" "$LOG" ||
	fail "the export's description does not say O_DIRECT"

head -c "$size" /dev/urandom >"$T/data2"
nbdcopy --flush "$T/data2" "$(uri_unix blk)" || fail "nbdcopy into the device failed"
cmp -n "$size" "$T/data2" "$LOOPDEV2" || fail "the device does not hold the data after FLUSH"
cmp -i "$size:$size" "$T/before" "$LOOPDEV2" ||
	fail "bytes past the export's end changed (its last block's read-modify-write)"

qemu-io -f raw "$(uri_unix blk)" -c 'write -z 1000 10000' -c 'flush' >/dev/null ||
	fail "qemu-io write -z failed"
cmp -n 10000 -i 1000:1000 /dev/zero "$LOOPDEV2" || fail "WRITE_ZEROES did not zero [1000, +10000)"
cmp -n 1000 "$T/data2" "$LOOPDEV2" || fail "WRITE_ZEROES clobbered the bytes before it"
cmp -i 11000:11000 -n $(( size - 11000 )) "$T/data2" "$LOOPDEV2" ||
	fail "WRITE_ZEROES clobbered the bytes after it"

# A cold cache: reads through O_DIRECT, the short last block included.
stop_wbd
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with status $EXIT_STATUS after SIGTERM, expected 0"
start_wbd
nbdcopy "$(uri_unix blk)" "$T/out2" || fail "nbdcopy out of the device failed"
cmp -n "$size" "$LOOPDEV2" "$T/out2" || fail "data read back through O_DIRECT differs"
[[ $(stat -c %s "$T/out2") == "$size" ]] || fail "read back $(stat -c %s "$T/out2") bytes, expected $size"
log "ok"
