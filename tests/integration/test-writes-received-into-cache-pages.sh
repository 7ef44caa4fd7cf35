#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# One copy per write: a WRITE of a page or more is received straight into
# cache pages (wbctl status: cache.zero_copy_bytes grows), and the data is
# right whichever way it went.  Over a 32M export of random data with a 16M
# cache (so pages are evicted and unaligned edges are read back in):
#   - random writes, aligned and not, 1 byte to 1 MiB, and 6 MiB ones (more
#     than the quarter of the cache that write buffers may hold: received
#     into a buffer, zero_copy_refused grows), plain and over TLS (PSK), read
#     back through libnbd against a shadow copy, and after FLUSH the backing
#     file matches it;
#   - a client that sends a 1 MiB WRITE header and half its payload, then
#     hangs up, leaves nothing: no dirty byte, the range reads as before,
#     the memory budget is given back, other clients go on;
#   - four connections writing one export at once, each its own stripes,
#     with unaligned 64K-1M writes: every byte is the last write's.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
source "$SRCDIR/lib-tls.sh"
need_python_nbd
need cmp

size=32M
head -c "$size" /dev/urandom >"$T/disk0.img"
cp "$T/disk0.img" "$T/shadow.img"
make_psk "$T/keys.psk" alice
add_export_mode disk0 "$size" writeback
write_cache_config 16M 'dirty_writeback_centisecs = 0;'
echo "tls = { mode = \"on\"; psk_file = \"$T/keys.psk\"; };" >>"$CONF"
start_wbd

"$PYTHON" - "$SRCDIR" "$(uri_unix disk0)" "$PORT" "$T" "$WBCTL" <<'PY' || fail "see above"
import json, os, random, subprocess, sys, threading, time
import nbd
srcdir, uri, port, tdir, wbctl = sys.argv[1:6]
sys.path.insert(0, srcdir)
import nbdraw

seed = int.from_bytes(os.urandom(4), "little")
print("random seed %d" % seed)
rng = random.Random(seed)
with open(tdir + "/shadow.img", "rb") as f:
    shadow = bytearray(f.read())
size = len(shadow)
K, M = 1024, 1024 * 1024
PS = 4096

def status():
    out = subprocess.run([wbctl, "-s", tdir + "/control.sock", "status",
                          "--json"], check=True, capture_output=True).stdout
    return json.loads(out)

def fail(msg):
    sys.exit("FAIL (seed %d): %s" % (seed, msg))

def check(h, off, n, what):
    got = h.pread(n, off)
    if got != shadow[off:off + n]:
        i = next(i for i in range(n) if got[i] != shadow[off + i])
        fail("%s: read [%d, +%d) differs from the shadow at %d"
             % (what, off, n, off + i))

def random_write(h, big=False):
    kind = rng.randrange(5)
    if big:
        n = 6 * M + rng.randrange(2) * rng.randrange(1, PS)
    elif kind == 0:                     # sub-page
        n = rng.randrange(1, PS)
    elif kind == 1:                     # whole pages, aligned
        n = PS * rng.randrange(1, 257)
    else:                               # unaligned head and tail
        n = rng.randrange(PS, M + 1)
    off = rng.randrange(size - n)
    if kind == 1:
        off -= off % PS
    buf = os.urandom(n)
    h.pwrite(buf, off)
    shadow[off:off + n] = buf
    return off, n

def random_writes(h, count, what):
    for i in range(count):
        off, n = random_write(h, big=(i % 40 == 39))
        if i % 8 == 0:
            lo = max(0, off - 5000)
            check(h, lo, min(size, off + n + 5000) - lo,
                  "%s: after write %d" % (what, i))

c0 = status()["cache"]
h = nbd.NBD()
h.connect_uri(uri)
random_writes(h, 160, "plain")

# The same over TLS (the payload decrypted record by record into pages).
t = nbd.NBD()
t.set_uri_allow_local_file(True)
t.connect_uri("nbds://alice@127.0.0.1:%s/disk0?tls-psk-file=%s/keys.psk"
              % (port, tdir))
random_writes(t, 80, "TLS")
t.shutdown()

c1 = status()["cache"]
if c1["zero_copy_bytes"] - c0["zero_copy_bytes"] < 16 * M:
    fail("only %d bytes were received into cache pages"
         % (c1["zero_copy_bytes"] - c0["zero_copy_bytes"]))
if c1["zero_copy_refused"] <= c0["zero_copy_refused"]:
    fail("no 6 MiB write was received into a buffer instead")
for off in range(0, size, M):
    check(h, off, M, "full read")
h.flush()
if status()["cache"]["dirty_bytes"] != 0:
    fail("dirty data after FLUSH")

# Half a payload, then gone.
class Args:
    unix = uri.split("socket=")[1]
raw = nbdraw.Raw(Args())
raw.open("disk0")
off = 5 * M + 1234
raw.request(1, off, M, payload=b"\xee" * (M // 2))   # NBD_CMD_WRITE
time.sleep(0.2)
raw.close()
deadline = time.time() + 30
while True:
    s = status()
    if s["limits"]["connections"] == 1 and s["limits"]["inflight_bytes"] == 0:
        break
    if time.time() > deadline:
        fail("the half-written request still holds %d bytes, %d connections"
             % (s["limits"]["inflight_bytes"], s["limits"]["connections"]))
    time.sleep(0.05)
if s["cache"]["dirty_bytes"] != 0:
    fail("a WRITE never completed left %d dirty bytes"
         % s["cache"]["dirty_bytes"])
check(h, off - PS, M + 2 * PS, "after a client left mid-payload")

# Four connections at once, each writing its own 1M stripes (so the
# result is known) with unaligned writes that cross pages and chunks.
errors = []
def writer(k):
    try:
        w = nbd.NBD()
        w.connect_uri(uri)
        r = random.Random(seed + k)
        stripes = [s for s in range(size // M) if s % 4 == k]
        for _ in range(60):
            s = r.choice(stripes)
            n = r.randrange(64 * K, M + 1)
            o = s * M + r.randrange(M - n + 1)
            buf = os.urandom(n)
            w.pwrite(buf, o)
            shadow[o:o + n] = buf       # disjoint stripes: no overlap
        w.shutdown()
    except Exception as e:              # reported by the main thread
        errors.append("writer %d: %s" % (k, e))
threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
for th in threads:
    th.start()
for th in threads:
    th.join()
if errors:
    fail("; ".join(errors))
for off in range(0, size, M):
    check(h, off, M, "after four writers")
h.flush()
h.shutdown()
with open(tdir + "/shadow.img", "wb") as f:
    f.write(shadow)
PY
cmp "$T/shadow.img" "$T/disk0.img" ||
	fail "after FLUSH the backing file differs from the shadow copy"
assert_alive
stop_wbd
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with status $EXIT_STATUS"
cmp "$T/shadow.img" "$T/disk0.img" ||
	fail "after exit the backing file differs from the shadow copy"
