#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A write with the FUA flag is on the backing file when its reply arrives,
# even in writeback mode with periodic writeback disabled (where a plain
# write stays in the cache), and only its own range is written back; in
# writethrough mode every write is.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export_mode wb 8M writeback
add_export_mode wt 8M writethrough
write_cache_config 32M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
start_wbd

"$PYTHON" - "$(uri_unix wb)" "$(uri_unix wt)" "$T/wb.img" "$T/wt.img" <<'PY' || fail "see above"
import nbd, os, random, sys
uri_wb, uri_wt, img_wb, img_wt = sys.argv[1:5]
rng = random.Random(6)

def on_backing(path, off, n):
    with open(path, "rb") as f:
        f.seek(off)
        return f.read(n)

h = nbd.NBD()
h.connect_uri(uri_wb)
if not h.can_fua():
    sys.exit("FAIL: the export does not advertise FUA")

# A plain write first: it stays in the cache (the contrast).
plain = os.urandom(65536)
h.pwrite(plain, 4 << 20)
if on_backing(img_wb, 4 << 20, 65536) == plain:
    sys.exit("FAIL: a plain write reached the backing file at once in "
             "writeback mode; this test cannot tell FUA apart")

cases = [(0, 4096), (12345, 1), (100000, 70000), ((6 << 20) + 511, 8193)]
for _ in range(20):
    cases.append((rng.randrange((8 << 20) - 40000), rng.randrange(1, 40000)))
for off, n in cases:
    if (4 << 20) <= off + n and off < (4 << 20) + 65536:
        continue            # keep the plain write's range apart
    buf = os.urandom(n)
    h.pwrite(buf, off, nbd.CMD_FLAG_FUA)
    if on_backing(img_wb, off, n) != buf:
        sys.exit("FAIL: FUA write [%d, +%d) is not on the backing file when "
                 "its reply arrives" % (off, n))
# FUA makes its own range durable, not everything (that is FLUSH).
if on_backing(img_wb, 4 << 20, 65536) == plain:
    sys.exit("FAIL: the FUA writes wrote back the plain write's range too: "
             "FUA is done as a whole FLUSH")
h.flush()
if on_backing(img_wb, 4 << 20, 65536) != plain:
    sys.exit("FAIL: after FLUSH the plain write is not on the backing file")
h.shutdown()

h = nbd.NBD()
h.connect_uri(uri_wt)
for off, n in cases:
    buf = os.urandom(n)
    h.pwrite(buf, off)
    if on_backing(img_wt, off, n) != buf:
        sys.exit("FAIL: writethrough write [%d, +%d) is not on the backing "
                 "file when its reply arrives" % (off, n))
    if h.pread(n, off) != buf:
        sys.exit("FAIL: writethrough write [%d, +%d) does not read back"
                 % (off, n))
h.shutdown()
PY
assert_alive
