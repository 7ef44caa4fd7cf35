#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# WRITE_ZEROES and TRIM stay correct against cached pages.
#  1. Over a backing file of random data, new data is written (dirty in the
#     cache, periodic writeback off); then WRITE_ZEROES on part of it (page
#     aligned and not) and TRIM on another part: reads return zeroes for the
#     zeroed ranges and the new data elsewhere, and after FLUSH the backing
#     file holds exactly that -- a trimmed range reads as zeroes or the new
#     data, never the old.
#  2. With background writeback constantly busy (tiny threshold), random
#     writes and WRITE_ZEROES interleave with writeback in flight; reads and,
#     after FLUSH, the backing file match a shadow copy.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
need cmp

head -c 8M /dev/urandom >"$T/disk0.img"
cp "$T/disk0.img" "$T/old.img"
add_export_mode disk0 8M writeback

log "phase 1: dirty pages, then WRITE_ZEROES and TRIM"
write_cache_config 32M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
start_wbd
"$PYTHON" - "$(uri_unix disk0)" "$T/disk0.img" "$T/old.img" <<'PY' || fail "phase 1: see above"
import nbd, os, sys
uri, backing, old_path = sys.argv[1:4]
with open(old_path, "rb") as f:
    old = f.read()
size = len(old)
MiB = 1 << 20
h = nbd.NBD()
h.connect_uri(uri)
if not (h.can_zero() and h.can_trim()):
    sys.exit("FAIL: the export advertises no WRITE_ZEROES or no TRIM")
new = bytearray(os.urandom(4 * MiB))
h.pwrite(new, 0)
expect = bytearray(new) + bytearray(old[4 * MiB:])
zeroes = [(512 << 10, 512 << 10), ((1 << 20) + 100, 5000), (3 * MiB - 1, 2)]
trims = [(2 * MiB, 512 << 10)]
for off, n in zeroes:
    h.zero(n, off)
    expect[off:off + n] = bytes(n)
# Zero a range that is partly outside the written data, too.
h.zero(1 * MiB, (4 * MiB) - 4096)
expect[4 * MiB - 4096:5 * MiB - 4096] = bytes(MiB)
for off, n in trims:
    h.trim(n, off)

def check(data, what):
    for off, n in trims:
        for p in range(off, off + n, 4096):
            page = data[p:p + 4096]
            if page == old[p:p + 4096]:
                sys.exit("FAIL: %s: trimmed page at %d holds the data from "
                         "before the write" % (what, p))
            if page != bytes(4096) and page != new[p:p + 4096]:
                sys.exit("FAIL: %s: trimmed page at %d holds neither zeroes "
                         "nor the data written" % (what, p))
    # Elsewhere, exactly the expected bytes.
    d, e = bytearray(data), bytearray(expect)
    for off, n in trims:
        d[off:off + n] = e[off:off + n] = bytes(n)
    if d != e:
        i = next(i for i in range(size) if d[i] != e[i])
        sys.exit("FAIL: %s: differs from the expected data at offset %d"
                 % (what, i))

through = h.pread(size, 0)
for off, n in zeroes:
    if through[off:off + n] != bytes(n):
        sys.exit("FAIL: reads of zeroed range [%d, +%d) are not zeroes" % (off, n))
check(through, "read through wbd")
h.flush()
with open(backing, "rb") as f:
    on_disk = f.read()
check(on_disk, "backing file after FLUSH")
if h.pread(size, 0) != through:
    sys.exit("FAIL: reads changed across FLUSH")
h.shutdown()
PY
stop_wbd
[[ $EXIT_STATUS == 0 ]] || fail "phase 1: wbd exited with status $EXIT_STATUS"

log "phase 2: writes and WRITE_ZEROES against writeback in flight"
rm -f "$CONF"
write_cache_config 4M 'dirty_background_bytes = "64K"; dirty_bytes = "1M"; dirty_writeback_centisecs = 0; max_io_bytes = "64K";'
cp "$T/disk0.img" "$T/shadow.img"
start_wbd
"$PYTHON" - "$(uri_unix disk0)" "$T/shadow.img" <<'PY' || fail "phase 2: see above"
import nbd, os, random, sys
uri, shadow_path = sys.argv[1:3]
seed = int.from_bytes(os.urandom(4), "little")
rng = random.Random(seed)
with open(shadow_path, "rb") as f:
    shadow = bytearray(f.read())
size = len(shadow)
region = 2 << 20                        # small, so ops hit in-flight pages
h = nbd.NBD()
h.connect_uri(uri)
for i in range(3000):
    n = rng.randrange(1, 40000)
    off = rng.randrange(region - n)
    if rng.randrange(3):
        buf = os.urandom(n)
        h.pwrite(buf, off)
        shadow[off:off + n] = buf
    else:
        h.zero(n, off)
        shadow[off:off + n] = bytes(n)
    if i % 50 == 0:
        m = rng.randrange(1, 64 << 10)
        o = rng.randrange(region - m)
        if h.pread(m, o) != shadow[o:o + m]:
            sys.exit("FAIL (seed %d): read [%d, +%d) after op %d differs "
                     "from the shadow copy" % (seed, o, m, i))
if h.pread(size, 0) != shadow:
    sys.exit("FAIL (seed %d): the export differs from the shadow copy" % seed)
h.flush()
with open(shadow_path, "wb") as f:
    f.write(shadow)
h.shutdown()
PY
cmp "$T/shadow.img" "$T/disk0.img" ||
	fail "phase 2: after FLUSH the backing file differs from the shadow copy"
