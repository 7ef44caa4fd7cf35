#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# SIGTERM writes back every dirty page before wbd exits 0: with periodic
# writeback off and the background threshold out of reach, unflushed
# writes over a pre-filled backing file are still only in the cache when
# the signal arrives; after exit 0 the backing file equals the shadow copy,
# and the log says that dirty data was written back at shutdown.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
need cmp

head -c 24M /dev/urandom >"$T/disk0.img"
cp "$T/disk0.img" "$T/shadow.img"
add_export_mode disk0 24M writeback
write_cache_config 48M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
start_wbd -v

"$PYTHON" - "$(uri_unix disk0)" "$T/disk0.img" "$T/shadow.img" <<'PY' || fail "see above"
import nbd, os, random, sys
uri, backing, shadow_path = sys.argv[1:4]
size = 24 << 20
rng = random.Random(8)
with open(shadow_path, "rb") as f:
    shadow = bytearray(f.read())
h = nbd.NBD()
h.connect_uri(uri)
for _ in range(400):
    n = rng.choice([1, 512, 4096, rng.randrange(1, 200000)])
    off = rng.randrange(size - n)
    buf = os.urandom(n)
    h.pwrite(buf, off)
    shadow[off:off + n] = buf
# 8M sequential too.
for off in range(8 << 20, 16 << 20, 1 << 20):
    buf = os.urandom(1 << 20)
    h.pwrite(buf, off)
    shadow[off:off + len(buf)] = buf
with open(backing, "rb") as f:
    if f.read() == shadow:
        sys.exit("FAIL: the data reached the backing file before SIGTERM; "
                 "this test cannot see the drain")
with open(shadow_path, "wb") as f:
    f.write(shadow)
# Leave without FLUSH (NBD_CMD_DISC only).
h.shutdown()
PY

stop_wbd "$WBD_PID" TERM 30
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with status $EXIT_STATUS after SIGTERM, expected 0"
cmp "$T/shadow.img" "$T/disk0.img" ||
	fail "after SIGTERM the backing file differs from the data written"
grep -qi 'writing back' "$LOG" ||
	fail "the log does not mention writing back dirty data at shutdown"
