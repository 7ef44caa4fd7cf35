#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# NBD_CMD_CACHE (advertised with NBD_FLAG_SEND_CACHE) reads a range into
# the cache without returning it, and answers once it is cached:
#  1. after h.cache() of 4 MiB, reading those 4 MiB reads nothing from the
#     backing device (its read_bytes stay) and counts cache hits, no miss;
#     the data is the backing file's;
#  2. it is bounded: asked for far more than the cache, it reads at most a
#     quarter of the cache (limits.max_cache_share's default), counted in
#     limits.cache_requests_cut and logged, and the dirty data in the
#     cache is all still there (dirty data is never evicted for it);
#  3. with limits.max_cache_share = 10, at most a tenth.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
need cmp

MiB=$((1 << 20))
head -c 16M /dev/urandom >"$T/disk0.img"
truncate -s 256M "$T/big.img"
add_export disk0 16M rw "" "$T/disk0.img"
add_export big 256M rw "" "$T/big.img"
write_cache_config 32M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
start_wbd

"$PYTHON" - "$(uri_unix disk0)" "$(uri_unix big)" "$WBCTL" "$T/control.sock" "$T/disk0.img" <<'PY' ||
import json, nbd, subprocess, sys
disk0, big, wbctl, ctl, img = sys.argv[1:6]
MiB = 1 << 20

def status():
    out = subprocess.run([wbctl, "-s", ctl, "status", "--json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)

def dev_reads(st, export):
    dev = next(e["device"] for e in st["exports"] if e["name"] == export)
    return next(d["read_bytes"] for d in st["devices"] if d["device"] == dev)

def export(st, name):
    return next(e for e in st["exports"] if e["name"] == name)

h = nbd.NBD()
h.connect_uri(disk0)
assert h.can_cache(), "NBD_FLAG_SEND_CACHE is not advertised"
s0 = status()
h.cache(4 * MiB, 2 * MiB)
s1 = status()
read = dev_reads(s1, "disk0") - dev_reads(s0, "disk0")
assert read >= 4 * MiB, "CACHE read %d bytes from the backing file" % read
assert export(s1, "disk0")["cached_bytes"] >= 4 * MiB, export(s1, "disk0")
data = h.pread(4 * MiB, 2 * MiB)
s2 = status()
assert dev_reads(s2, "disk0") == dev_reads(s1, "disk0"), \
    "the read after CACHE went to the backing file: %d bytes" % (
        dev_reads(s2, "disk0") - dev_reads(s1, "disk0"))
assert s2["cache"]["hits"] > s1["cache"]["hits"], (s1["cache"], s2["cache"])
assert s2["cache"]["misses"] == s1["cache"]["misses"], (s1["cache"], s2["cache"])
with open(img, "rb") as f:
    f.seek(2 * MiB)
    assert data == f.read(4 * MiB), "the data read after CACHE is wrong"
h.shutdown()

# Bounded: 8 MiB dirty (a quarter of the cache), then CACHE of 256 MiB.
h = nbd.NBD()
h.connect_uri(big)
for off in range(0, 8 * MiB, MiB):
    h.pwrite(b"\x5a" * MiB, 100 * MiB + off)
s3 = status()
assert export(s3, "big")["dirty_bytes"] == 8 * MiB, export(s3, "big")
h.cache(256 * MiB, 0)
s4 = status()
read = dev_reads(s4, "big") - dev_reads(s3, "big")
print("CACHE of 256 MiB through a 32 MiB cache read %d MiB" % (read // MiB))
assert 0 < read <= 8 * MiB, "CACHE read %d bytes: more than a quarter of the cache" % read
assert read > 4 * MiB, "CACHE read %d bytes: less than the quarter it may" % read
assert s4["limits"]["max_cache_share"] == 25, s4["limits"]
cut = s4["limits"]["cache_requests_cut"] - s3["limits"]["cache_requests_cut"]
assert cut == 1, "limits.cache_requests_cut grew by %d, not 1" % cut
assert export(s4, "big")["dirty_bytes"] == 8 * MiB, export(s4, "big")
assert h.pread(MiB, 100 * MiB) == b"\x5a" * MiB
h.shutdown()
PY
	fail "see above"
assert_alive
grep -q 'a CACHE request reached limits.max_cache_share' "$LOG" ||
	fail "no log line for the CACHE request cut short"

# 3. A tenth of the cache (a restart applies it).
stop_wbd
echo 'limits = { max_cache_share = 10; };' >>"$CONF"
start_wbd
"$PYTHON" - "$(uri_unix big)" "$WBCTL" "$T/control.sock" <<'PY' || fail "see above"
import json, nbd, subprocess, sys
big, wbctl, ctl = sys.argv[1:4]
MiB = 1 << 20
def status():
    return json.loads(subprocess.run([wbctl, "-s", ctl, "status", "--json"],
                                     check=True, capture_output=True,
                                     text=True).stdout)
def reads(st):
    dev = next(e["device"] for e in st["exports"] if e["name"] == "big")
    return next(d["read_bytes"] for d in st["devices"] if d["device"] == dev)
s0 = status()
assert s0["limits"]["max_cache_share"] == 10, s0["limits"]
h = nbd.NBD()
h.connect_uri(big)
h.cache(256 * MiB, 0)
s1 = status()
read = reads(s1) - reads(s0)
print("with max_cache_share = 10: CACHE of 256 MiB read %d KiB" % (read // 1024))
assert 0 < read <= 32 * MiB // 10, "CACHE read %d bytes: more than a tenth of the cache" % read
assert s1["limits"]["cache_requests_cut"] == 1, s1["limits"]
h.shutdown()
PY
assert_alive
