#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The cache resists scans: a 2M hot set read a few times stays cached
# through one sequential pass (nbdcopy) over a 64M export, in an 8M cache.
#
# Hits are told from misses without timing: after the hot set is cached,
# the backing file is changed underneath wbd (dd conv=notrunc, a test
# trick: a real backing device is never changed behind wbd's back).  A
# cached page still reads as the old data, a page read again from the
# backing file as the new.  A control region, read once before the change
# and then scanned over, shows the trick does see misses.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
need nbdcopy dd

head -c 64M /dev/urandom >"$T/disk0.img"
cp "$T/disk0.img" "$T/old.img"
add_export_mode disk0 64M writeback
write_cache_config 8M 'dirty_writeback_centisecs = 0;'
start_wbd

MiB=$((1 << 20))
hot_off=$((8 * MiB))            # the hot set: [8M, 10M)
ctl_off=$((40 * MiB))           # the control: [40M, 42M)

"$PYTHON" - "$(uri_unix disk0)" "$hot_off" "$ctl_off" <<'PY' || fail "see above"
import nbd, sys
uri, hot, ctl = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
h = nbd.NBD()
h.connect_uri(uri)
for _ in range(4):
    for off in range(hot, hot + (2 << 20), 64 << 10):
        h.pread(64 << 10, off)
for off in range(ctl, ctl + (2 << 20), 64 << 10):
    h.pread(64 << 10, off)
h.shutdown()
PY

# Change the hot set and the control region behind wbd's back.
head -c 2M /dev/urandom >"$T/new-hot.bin"
head -c 2M /dev/urandom >"$T/new-ctl.bin"
dd if="$T/new-hot.bin" of="$T/disk0.img" bs=1M seek=8 conv=notrunc status=none
dd if="$T/new-ctl.bin" of="$T/disk0.img" bs=1M seek=40 conv=notrunc status=none

log "one sequential pass over the 64M export"
nbdcopy "$(uri_unix disk0)" null: || fail "nbdcopy of the export to null: failed"

"$PYTHON" - "$(uri_unix disk0)" "$hot_off" "$ctl_off" "$T/old.img" \
	"$T/new-hot.bin" "$T/new-ctl.bin" <<'PY' || fail "see above"
import nbd, sys
uri, hot, ctl = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(sys.argv[4], "rb") as f:
    old = f.read()
new_hot = open(sys.argv[5], "rb").read()
new_ctl = open(sys.argv[6], "rb").read()
h = nbd.NBD()
h.connect_uri(uri)

def classify(base, new):
    hits = misses = 0
    for i in range(0, 2 << 20, 4096):
        page = h.pread(4096, base + i)
        if page == old[base + i:base + i + 4096]:
            hits += 1
        elif page == new[i:i + 4096]:
            misses += 1
        else:
            sys.exit("FAIL: page at %d is neither the old nor the new data"
                     % (base + i))
    return hits, misses

ctl_hits, ctl_misses = classify(ctl, new_ctl)
hot_hits, hot_misses = classify(hot, new_hot)
print("hot set: %d of 512 pages still cached; control: %d of 512"
      % (hot_hits, ctl_hits))
if ctl_misses < 256:
    sys.exit("FAIL: the control region (read once, then scanned over) is "
             "still mostly cached (%d of 512 pages): the scan did not push "
             "anything out, so this test proves nothing" % ctl_hits)
if hot_hits < 480:
    sys.exit("FAIL: a sequential scan evicted the hot set: only %d of its "
             "512 pages are still cached" % hot_hits)
h.shutdown()
PY
assert_alive
