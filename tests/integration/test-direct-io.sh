#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# direct = true: the backing file is opened with O_DIRECT.  The export's
# size (64 MiB + 1000 bytes) is a multiple of no block size, so its last
# page is written back through the read-modify-write of an aligned bounce
# buffer.  Data copied in with nbdcopy, and FUA writes at unaligned offsets,
# are on the file after FLUSH (FUA ones when their reply arrives) and after
# SIGTERM, and the file keeps its size; a cold restart reads it all back
# through O_DIRECT.  A filesystem that refuses O_DIRECT (ramfs) fails
# start-up with a message naming the file, and leaves no file behind.
# test-block-device-backing covers a loop device with direct = true.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need nbdcopy cmp dd

SIZE=$(( (64 << 20) + 1000 ))
DIRECT_DIR=
RAMFS=
SHM_DIR=

# Stop wbd before what its backing lives on goes, then the usual cleanup.
_direct_io_cleanup() {
	local rc=$?
	trap - ERR
	set +e
	stop_started_daemons
	[[ -n $RAMFS ]] && umount "$RAMFS" 2>/dev/null
	[[ -n $SHM_DIR ]] && rm -rf "$SHM_DIR"
	[[ -n $DIRECT_DIR && $DIRECT_DIR != "$T" ]] && rm -rf "$DIRECT_DIR"
	(exit "$rc")
	_cleanup
}
trap _direct_io_cleanup EXIT

# direct_ok DIR: can a file in DIR be written with O_DIRECT?
direct_ok() {
	local rc=0
	dd if=/dev/zero of="$1/.direct-probe" bs=4096 count=1 oflag=direct \
		status=none 2>/dev/null || rc=1
	rm -f "$1/.direct-probe"
	return "$rc"
}

# $T may be on tmpfs (which refuses O_DIRECT before Linux 6.6) or overlay;
# the build directory is usually on a real disk.
if direct_ok "$T"; then
	DIRECT_DIR=$T
else
	DIRECT_DIR=$(mktemp -d "$(cd "$(dirname "$WBD")/.." && pwd)/direct-io.XXXXXX")
	direct_ok "$DIRECT_DIR" ||
		skip "neither $T nor $(dirname "$DIRECT_DIR") supports O_DIRECT"
fi
IMG=$DIRECT_DIR/disk0.img
log "backing file $IMG on $(stat -f -c %T "$DIRECT_DIR")"

_EXPORTS=("  { name = \"disk0\"; backing = \"$IMG\"; size = $SIZE; direct = true; }")
write_config
start_wbd

grep -q "$IMG: opened with O_DIRECT, transfers aligned to [0-9]* bytes" "$LOG" ||
	fail "the log does not say that $IMG is opened with O_DIRECT"
grep -q "export \"disk0\": file $IMG (O_DIRECT)" "$LOG" ||
	fail "the export's description does not say O_DIRECT"
log "$(grep -o 'opened with O_DIRECT.*' "$LOG")"

head -c "$SIZE" /dev/urandom >"$T/data"
nbdcopy --flush "$T/data" "$(uri_unix disk0)" || fail "nbdcopy into the export failed"
cmp "$T/data" "$IMG" || fail "after FLUSH the backing file differs from the data"
[[ $(stat -c %s "$IMG") == "$SIZE" ]] ||
	fail "the backing file is $(stat -c %s "$IMG") bytes, expected $SIZE"

# FUA writes at unaligned offsets, many at the tail; plain ones in between.
if [[ -n $PYTHON ]]; then
	"$PYTHON" - "$(uri_unix disk0)" "$IMG" "$T/data" "$SIZE" <<'PY' || fail "see above"
import nbd, os, random, sys
uri, img, data, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rng = random.Random(13)
h = nbd.NBD()
h.connect_uri(uri)
if not h.can_fua():
    sys.exit("FAIL: the export does not advertise FUA")
with open(data, "r+b") as shadow, open(img, "rb") as backing:
    for i in range(300):
        n = rng.choice([1, 511, 4097, rng.randrange(1, 70000)])
        if i % 3 == 0:      # within the last 8 KiB
            off = size - n - rng.randrange(min(8192, size - n) + 1)
        else:
            off = rng.randrange(size - n + 1)
        buf = os.urandom(n)
        fua = i % 2 == 0
        h.pwrite(buf, off, nbd.CMD_FLAG_FUA if fua else 0)
        shadow.seek(off)
        shadow.write(buf)
        if fua:
            backing.seek(off)
            if backing.read(n) != buf:
                sys.exit("FAIL: FUA write [%d, +%d) is not on the backing "
                         "file when its reply arrives" % (off, n))
h.flush()
h.shutdown()
PY
	cmp "$T/data" "$IMG" || fail "after the FUA writes and FLUSH the backing file differs"
else
	log "python3-libnbd not found: FUA writes not tested"
fi

stop_wbd
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with status $EXIT_STATUS after SIGTERM, expected 0"
cmp "$T/data" "$IMG" || fail "after SIGTERM the backing file differs from the data"
[[ $(stat -c %s "$IMG") == "$SIZE" ]] ||
	fail "after SIGTERM the backing file is $(stat -c %s "$IMG") bytes, expected $SIZE"

# A cold cache: every read misses and goes to the file through O_DIRECT.
start_wbd
nbdcopy "$(uri_unix disk0)" "$T/out" || fail "nbdcopy out of the export failed"
cmp "$T/data" "$T/out" || fail "data read back through O_DIRECT differs"
stop_wbd
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with status $EXIT_STATUS, expected 0"

# A filesystem without O_DIRECT: tmpfs before Linux 6.6, ramfs always.
NODIRECT=
if [[ -d /dev/shm && -w /dev/shm ]] && ! direct_ok /dev/shm; then
	SHM_DIR=$(mktemp -d /dev/shm/wbd-it.XXXXXX)
	NODIRECT=$SHM_DIR
elif [[ $(id -u) == 0 ]] && mkdir "$T/ramfs" &&
     mount -t ramfs wbd-test "$T/ramfs" 2>/dev/null; then
	RAMFS=$T/ramfs
	NODIRECT=$RAMFS
fi
if [[ -z $NODIRECT ]]; then
	log "no filesystem without O_DIRECT here (not root, no ramfs): refusal not tested"
	log "ok"
	exit 0
fi
log "refusal on $(stat -f -c %T "$NODIRECT") ($NODIRECT)"

BAD_IMG=$NODIRECT/disk.img
_EXPORTS=("  { name = \"bad\"; backing = \"$BAD_IMG\"; size = \"1M\"; direct = true; }")
write_config "$T/bad.conf" "$T/bad.sock" "$(free_port)"
spawn_wbd "$T/bad.conf" "$T/bad.log"
rc=0
_wait_ready "$SPAWNED_PID" "$T/bad.sock" "" || rc=$?
[[ $rc == 2 ]] || fail "wbd started on a backing without O_DIRECT support"
[[ $EXIT_STATUS != 0 ]] || fail "wbd exited 0 on a backing without O_DIRECT support"
grep -q "$BAD_IMG: the filesystem does not support O_DIRECT" "$T/bad.log" ||
	fail "no clear message about O_DIRECT: $(cat "$T/bad.log")"
[[ ! -e $BAD_IMG ]] || fail "the failed start-up left $BAD_IMG behind"
log "refused: $(grep -o 'the filesystem does not support O_DIRECT.*' "$T/bad.log")"
log "ok"
