#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Sub-page and unaligned writes (1 byte to 20000 bytes at any offset, and
# 512-byte sectors) over a backing file full of random data never invent
# the bytes around them: every read through wbd matches a shadow copy, and
# after FLUSH so does the backing file.  Run twice: with a cache that holds
# the whole export, and with a 1M cache where pages are evicted and partial
# pages must be read back in from the backing file.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
need cmp

size=8M
head -c "$size" /dev/urandom >"$T/disk0.img"
add_export_mode disk0 "$size" writeback

for cache in 32M 1M; do
	log "cache $cache"
	rm -f "$CONF"
	write_cache_config "$cache" 'dirty_writeback_centisecs = 0;'
	cp "$T/disk0.img" "$T/shadow.img"
	start_wbd
	"$PYTHON" - "$(uri_unix disk0)" "$T/shadow.img" "$cache" <<'PY' || fail "cache $cache: see above"
import nbd, os, random, sys
uri, shadow_path, cache = sys.argv[1:4]
seed = int.from_bytes(os.urandom(4), "little")
print("cache %s: random seed %d" % (cache, seed))
rng = random.Random(seed)
with open(shadow_path, "rb") as f:
    shadow = bytearray(f.read())
size = len(shadow)

h = nbd.NBD()
h.connect_uri(uri)

def check(off, n, what):
    got = h.pread(n, off)
    if got != shadow[off:off + n]:
        i = next(i for i in range(n) if got[i] != shadow[off + i])
        sys.exit("FAIL: cache %s (seed %d): %s: read [%d, +%d) differs from "
                 "the shadow copy at offset %d" % (cache, seed, what, off, n,
                                                   off + i))

for i in range(3000):
    kind = rng.randrange(4)
    if kind == 0:                       # tiny
        n = rng.randrange(1, 64)
        off = rng.randrange(size - n)
    elif kind == 1:                     # 512-byte sectors
        n = 512 * rng.randrange(1, 17)
        off = 512 * rng.randrange((size - n) // 512)
    else:                               # anything up to 20000 bytes
        n = rng.randrange(1, 20001)
        off = rng.randrange(size - n)
    buf = os.urandom(n)
    h.pwrite(buf, off)
    shadow[off:off + n] = buf
    if i % 10 == 0:                     # the neighbourhood of this write
        lo = max(0, off - 5000)
        check(lo, min(size, off + n + 5000) - lo, "after write %d" % i)
    if i % 100 == 0:
        m = rng.randrange(1, 100000)
        check(rng.randrange(size - m), m, "random read")

for off in range(0, size, 1 << 20):
    check(off, 1 << 20, "full read")
h.flush()
with open(shadow_path, "wb") as f:
    f.write(shadow)
h.shutdown()
PY
	cmp "$T/shadow.img" "$T/disk0.img" ||
		fail "cache $cache: after FLUSH the backing file differs from the shadow copy"
	stop_wbd
	[[ $EXIT_STATUS == 0 ]] || fail "cache $cache: wbd exited with status $EXIT_STATUS"
	cmp "$T/shadow.img" "$T/disk0.img" ||
		fail "cache $cache: after exit the backing file differs from the shadow copy"
done
