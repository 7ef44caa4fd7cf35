#!/usr/bin/env bash
# A block device as backing (a loop device here): its own MAJ:MIN as the
# writeback device (flush-7:N), its size from BLKGETSIZE64, data written
# back to it, WRITE_ZEROES and TRIM through the block ioctls.  Skips (77)
# where no loop device can be set up (not root, no loop driver).
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need nbdinfo
need qemu-io

[[ $(id -u) == 0 ]] || skip "needs root to set up a loop device"
command -v losetup >/dev/null || skip "losetup not found"
truncate -s 32M "$T/loop.img"
LOOPDEV=$(losetup -f --show "$T/loop.img" 2>/dev/null) ||
	skip "cannot set up a loop device here"

# Stop wbd before the loop device goes, then the usual cleanup.
_detach_loop_then_cleanup() {
	local rc=$?
	trap - ERR
	set +e
	stop_started_daemons
	losetup -d "$LOOPDEV" 2>/dev/null
	(exit "$rc")
	_cleanup
}
trap _detach_loop_then_cleanup EXIT

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
log "ok"
