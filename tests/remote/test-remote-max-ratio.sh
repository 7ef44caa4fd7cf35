#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A device's max_ratio bounds its share of the dirty limit, so a flood of
# writes to one slow remote does not hold writers to another.
#
# Two nbdkit servers: A slowed by the delay filter (every write takes
# 500 ms), B fast.  The dirty limit is 32 MiB and writeback.devices gives
# A's device max_ratio = 20: 6.4 MiB.  wbctl status shows the shares (20 on
# A's device, 100 on B's).  While a writer floods A, A's dirty bytes
# (with those under writeback, as the throttle counts them), sampled
# every 50 ms from the control socket's status, reach its throttling
# range (half its share) and never pass the share by more than 2 MiB (the
# writer has one 256 KiB request in flight); the flood moves at A's
# writeback pace.  Meanwhile 32 MiB written to B (256 KiB writes, one at a
# time) and a FLUSH take about what they took before the flood (at most 10
# times a baseline, plus 2 s), where without the share A would fill the
# dirty limit and every write to B would be paced (up to 200 ms each).  (wbctl status has no throttling counters, so
# throttling shows as these bounds.)  At the end a FLUSH of A succeeds and
# both servers, read directly, hold what was written.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl

start_nbdkit a --filter=delay memory 64M delay-write=500ms
A=$KIT_SOCK
start_nbdkit b memory 64M
B=$KIT_SOCK
add_remote_export a "$(kit_uri "$A")"
add_remote_export b "$(kit_uri "$B")"
# A is named first: it is device 43:0.
write_cache_config 128M 'dirty_background_bytes = "8M"; dirty_bytes = "32M"; dirty_writeback_centisecs = 0; devices = ( { device = "43:0"; max_ratio = 20; } );'
# A's dirty data must pile up to its share: no write-behind.
add_remote_settings 'io_timeout_ms = 60000; write_behind = false;'
start_wbd

dev_a=$(export_device a)
dev_b=$(export_device b)
[[ $dev_a == 43:0 && $dev_b == 43:1 ]] ||
	fail "expected a on 43:0 and b on 43:1, got a on '$dev_a', b on '$dev_b'"
grep -q "writeback device 43:0: .*max_ratio 20\$" "$LOG" ||
	fail "the log does not show max_ratio 20 on 43:0: $(grep 'writeback device' "$LOG")"

head -c 64M /dev/urandom >"$T/a-data"
head -c 64M /dev/urandom >"$T/b-data"

"$PYTHON" - "$WBCTL" "$T/control.sock" "$(uri_unix a)" "$(uri_unix b)" \
	"$T/a-data" "$T/b-data" "$T/result" <<'PY' || fail "see above"
import json, nbd, socket, subprocess, sys, threading, time
wbctl, ctl, uri_a, uri_b, a_path, b_path, result = sys.argv[1:8]
MiB = 1 << 20

def status():
    out = subprocess.run([wbctl, "-s", ctl, "status", "--json"],
                         check=True, capture_output=True, timeout=10).stdout
    return json.loads(out)

# The sampler's own connection to the control socket: a wbctl process
# for each sample is too slow for 50 ms under a sanitizer and load.
sock = socket.socket(socket.AF_UNIX)
sock.connect(ctl)
sock_rd = sock.makefile("rb")
def sample_status():
    sock.sendall(b'{"v": 1, "cmd": "status"}\n')
    return json.loads(sock_rd.readline())

def dev(st, name):
    for d in st["devices"]:
        if d["device"] == name:
            return d
    sys.exit("FAIL: no device %s in wbctl status: %s" % (name, st))

st = status()
limit = st["thresholds"]["dirty_bytes"]
if limit != 32 * MiB:
    sys.exit("FAIL: the dirty limit is %d, not 32 MiB" % limit)
if dev(st, "43:0")["max_ratio"] != 20 or dev(st, "43:1")["max_ratio"] != 100:
    sys.exit("FAIL: status shows max_ratio %s on 43:0 and %s on 43:1, "
             "not 20 and 100" % (dev(st, "43:0")["max_ratio"],
                                 dev(st, "43:1")["max_ratio"]))
if dev(st, "43:0")["exports"] != ["a"] or dev(st, "43:1")["exports"] != ["b"]:
    sys.exit("FAIL: exports per device: %s" % [
        (d["device"], d["exports"]) for d in st["devices"]])
share = limit * 20 // 100
bound = share + 2 * MiB
a_data = open(a_path, "rb").read()
b_data = open(b_path, "rb").read()

def write_b(h, off, n):
    t0 = time.monotonic()
    for o in range(off, off + n, 256 * 1024):
        h.pwrite(b_data[o:o + 256 * 1024], o)
    h.flush()
    return time.monotonic() - t0

hb = nbd.NBD()
hb.connect_uri(uri_b)
baseline = write_b(hb, 0, 32 * MiB)
print("max-ratio: baseline: 32 MiB + FLUSH to b in %.2f s" % baseline)

# The flood: 256 KiB writes to a, one at a time, until told to stop.
stop = threading.Event()
flood = {"bytes": 0, "error": None}
def flooder():
    h = nbd.NBD()
    h.connect_uri(uri_a)
    try:
        off = 0
        while not stop.is_set() and off < len(a_data):
            h.pwrite(a_data[off:off + 256 * 1024], off)
            off += 256 * 1024
            flood["bytes"] = off
    except nbd.Error as e:
        flood["error"] = str(e)
    h.shutdown()

# The sampler: A's dirty bytes and those under writeback (what the
# throttle counts, as the kernel's counts NR_WRITEBACK) every 50 ms.
samples = []
sampling = threading.Event()
def sampler():
    while not sampling.is_set():
        st = sample_status()
        a = dev(st, "43:0")
        samples.append((time.monotonic(),
                        a["dirty_bytes"] + a["writeback_bytes"],
                        dev(st, "43:1")["dirty_bytes"],
                        st["cache"]["dirty_bytes"]))
        time.sleep(0.05)

ft = threading.Thread(target=flooder)
stt = threading.Thread(target=sampler)
t_start = time.monotonic()
ft.start()
stt.start()
try:
    # Wait until A is in its throttling range (half its share).
    deadline = time.monotonic() + 20
    while not samples or samples[-1][1] < share // 2:
        if time.monotonic() > deadline or not ft.is_alive():
            sys.exit("FAIL: A's dirty bytes never reached half its share "
                     "(%d): max %d" % (share // 2,
                                       max([s[1] for s in samples] or [0])))
        time.sleep(0.05)
    time.sleep(2)
    flood_before = flood["bytes"]
    t_b = time.monotonic()
    during = write_b(hb, 32 * MiB, 32 * MiB)
    flood_during = flood["bytes"] - flood_before
    time.sleep(1)
finally:
    stop.set()
    ft.join(120)
    sampling.set()
    stt.join(20)
hb.shutdown()
if flood["error"]:
    sys.exit("FAIL: the flood's write failed: %s" % flood["error"])

max_a = max(s[1] for s in samples)
max_total = max(s[3] for s in samples)
took = time.monotonic() - t_start
print("max-ratio: %d samples; A's dirty max %.1f MiB (share %.1f MiB, bound "
      "%.1f MiB); all dirty max %.1f MiB; flood wrote %.1f MiB in %.1f s "
      "(%.1f MiB while b wrote 32 MiB in %.2f s)"
      % (len(samples), max_a / MiB, share / MiB, bound / MiB,
         max_total / MiB, flood["bytes"] / MiB, took, flood_during / MiB,
         during))
if len(samples) < 10:
    sys.exit("FAIL: only %d status samples" % len(samples))
if max_a > bound:
    over = [s for s in samples if s[1] > bound]
    sys.exit("FAIL: A's dirty bytes reached %d, above its max_ratio share "
             "%d + 2 MiB (%d samples over)" % (max_a, share, len(over)))
if flood["bytes"] >= len(a_data):
    sys.exit("FAIL: the flood wrote all 64 MiB: A's writer was not held")
limit_b = 10 * baseline + 2
if during > limit_b:
    sys.exit("FAIL: b's 32 MiB + FLUSH took %.2f s during A's flood, "
             "%.2f s before it (allowed %.2f s): b is held by A's dirty data"
             % (during, baseline, limit_b))
open(result, "w").write("%d\n" % flood["bytes"])
PY

flooded=$(cat "$T/result")
log "FLUSH of a ($((flooded >> 20)) MiB flooded)"
"$PYTHON" - "$(uri_unix a)" <<'PY' || fail "FLUSH of a failed"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.flush()
h.shutdown()
PY
remote_read "$A" 0 "$flooded" "$T/a-remote"
cmp -n "$flooded" "$T/a-data" "$T/a-remote" || fail "nbdkit a does not hold the flood's data"
remote_read "$B" 0 $((64 << 20)) "$T/b-remote"
cmp "$T/b-data" "$T/b-remote" || fail "nbdkit b does not hold b's data"
assert_alive
