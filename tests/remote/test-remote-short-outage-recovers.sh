#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A remote that fails every write for one second, under a steady writer
# held at the dirty limit: the writes that fail together count once in the
# back-off (at most 1 s), and once the remote answers again the writer's
# acknowledged bytes per second recover within 2 s (they took ~30 s when
# each failing write doubled the back-off).  No data is lost: after FLUSH
# nbdkit holds exactly the last data written.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd

truncate -s 32M "$T/remote.img"
ERRS=$T/errors-on
start_nbdkit kit --filter=error file "$T/remote.img" \
	error-pwrite=EIO error-pwrite-rate=100% error-pwrite-file="$ERRS"
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")"
write_cache_config 16M 'dirty_background_ratio = 10; dirty_ratio = 20;'
start_wbd

"$PYTHON" - "$(uri_unix disk0)" "$ERRS" "$T/last" "$T/control.sock" <<'PY' ||
import json, nbd, os, socket, sys, threading, time
uri, errs, last_path, ctl = sys.argv[1:5]
BLOCK, SPAN = 256 << 10, 32 << 20
acks = []                       # (time, bytes) of each acknowledged write
written = []                    # (time, the device's written_bytes)
stop = threading.Event()
last = bytearray(SPAN)
errors = []

def writer():
    try:
        h = nbd.NBD()
        h.connect_uri(uri)
        off, n = 0, 0
        while not stop.is_set():
            buf = bytes([n % 251 + 1]) * BLOCK
            h.pwrite(buf, off)
            last[off:off + BLOCK] = buf
            acks.append((time.monotonic(), BLOCK))
            off = (off + BLOCK) % SPAN
            n += 1
        # This connection was open when writeback failed: its first
        # FLUSH reports it (EIO, once); the next one must succeed.
        try:
            h.flush()
        except nbd.Error:
            pass
        h.flush()
        h.shutdown()
    except Exception as e:
        errors.append(repr(e))

def poller():
    s = socket.socket(socket.AF_UNIX)
    s.connect(ctl)
    f = s.makefile("rwb")
    while not stop.is_set():
        f.write(b'{"v":1,"cmd":"status"}\n')
        f.flush()
        st = json.loads(f.readline())
        written.append((time.monotonic(),
                        sum(d["written_bytes"] for d in st["devices"])))
        time.sleep(0.05)

threads = [threading.Thread(target=writer), threading.Thread(target=poller)]
for t in threads:
    t.start()
time.sleep(3)
outage_start = time.monotonic()
open(errs, "w").close()
time.sleep(1)
os.unlink(errs)
outage_end = time.monotonic()
time.sleep(5)
stop.set()
for t in threads:
    t.join(60)
if any(t.is_alive() for t in threads) or errors:
    sys.exit("FAIL: the writer: %s" % (errors or "still running after 60 s"))
open(last_path, "wb").write(last)

def acked(a, b):
    return sum(n for when, n in acks if a <= when < b) / (b - a)

base = acked(outage_start - 2, outage_start)
print("acknowledged: %.1f MiB/s before the outage, %.1f MiB/s in its second "
      "half" % (base / 2**20, acked(outage_start + 0.5, outage_end) / 2**20))
if base <= 0:
    sys.exit("FAIL: nothing acknowledged before the outage")
# Writeback resumed: the device's written bytes rise again.
at_end = max([w for when, w in written if when <= outage_end], default=0)
resumed = next((when for when, w in written
                if when > outage_end and w > at_end), None)
if resumed is None:
    sys.exit("FAIL: no writeback within 5 s of the remote answering again")
print("writeback resumed %.2f s after the remote answered again"
      % (resumed - outage_end))
if resumed - outage_end > 1.5:
    sys.exit("FAIL: writeback resumed %.2f s after the remote answered "
             "(more than 1.5 s)" % (resumed - outage_end))
# The writer: its acknowledged rate back to a quarter of before within 2 s.
s = outage_end
while s < outage_end + 2 and acked(s, s + 0.5) < base / 4:
    s += 0.1
if s >= outage_end + 2:
    sys.exit("FAIL: the writer's acknowledged rate did not recover "
             "within 2 s")
print("the writer recovered %.1f s after the remote answered" % (s - outage_end))
PY
	fail "see above"
cmp "$T/last" "$T/remote.img" ||
	fail "nbdkit's data differs from what was last written after FLUSH"
assert_alive
