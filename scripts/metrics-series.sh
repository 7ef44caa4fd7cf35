#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# metrics-series.sh - drive a scripted workload through a test wbd, scrape
# its metrics every half second, and draw the dashboard's panels from the
# series (scripts/metrics-dashboard.py): how docs/dashboard.png is made.
#
# Usage: scripts/metrics-series.sh [OUT.png [SERIES.jsonl]]
#   (default docs/dashboard.png and a temporary series)
# Environment: WBD, WBCTL (default build/daemon/wbd, build/client/wbctl).
# Needs nbdkit, python3-libnbd, python3-prometheus-client and
# python3-matplotlib.  Takes about 40 s.
#
# The run: export "disk0" on a local file and "r0" on a slow remote (nbdkit,
# one thread, 20 ms a write), a 64M cache with an 8M dirty limit.
#   0-8 s    disk0: 4K writes and reads that hit, a FLUSH every 0.2 s
#   8-20 s   r0: a writer far faster than the device, paced; a FLUSH a second
#   20-26 s  r0's writes fail (nbdkit's error filter): runs fail, FLUSH fails
#   26-36 s  the errors stop: the backlog is written, FLUSH works again;
#            disk0 reads a cold area (misses)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
WBD=${WBD:-$root/build/daemon/wbd}
OUT=${1:-$root/docs/dashboard.png}
T=$(mktemp -d "${TMPDIR:-/tmp}/wbd-series.XXXXXX")
SERIES=${2:-$T/series.jsonl}
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT

[[ -x $WBD ]] || { echo "metrics-series: no wbd at $WBD (set WBD)" >&2; exit 1; }
nbdkit -f -U "$T/kit.sock" --threads=1 --filter=error --filter=delay \
	memory 256M delay-write=20ms error-pwrite=EIO error-pwrite-rate=100% \
	error-pwrite-file="$T/errors-on" >"$T/nbdkit.log" 2>&1 &
PIDS+=($!)
truncate -s 256M "$T/disk0.img"
cat >"$T/wbd.conf" <<CONF
listen = { unix = [ "$T/nbd.sock" ]; };
cache = { size = "64M"; page_size = "4K"; };
writeback = { dirty_background_bytes = "4M"; dirty_bytes = "8M";
  dirty_expire_centisecs = 300; dirty_writeback_centisecs = 100; };
control = { socket = "$T/control.sock"; };
exports = (
  { name = "disk0"; backing = "$T/disk0.img"; },
  { name = "r0"; backing = "nbd+unix:///?socket=$T/kit.sock"; }
);
CONF
for _ in $(seq 100); do [[ -S $T/kit.sock ]] && break; sleep 0.1; done
"$WBD" -f -c "$T/wbd.conf" >"$T/wbd.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [[ -S $T/control.sock ]] && break; sleep 0.1; done

/usr/bin/python3 - "$T" "$SERIES" <<'PY'
import json, os, socket, sys, threading, time
import nbd
t, series = sys.argv[1:3]
stop = threading.Event()

def scraper():
    with open(series, "w") as out:
        while not stop.is_set():
            s = socket.socket(socket.AF_UNIX)
            s.connect(t + "/control.sock")
            s.sendall(b'{"v": 1, "cmd": "metrics"}\n')
            a = json.loads(s.makefile("rb").readline())
            s.close()
            out.write(json.dumps({"t": time.time(), "text": a["text"]}) + "\n")
            time.sleep(0.5)

def connect(name):
    h = nbd.NBD()
    h.connect_uri("nbd+unix:///%s?socket=%s/nbd.sock" % (name, t))
    return h

def until(deadline, step):
    while time.monotonic() < deadline and not stop.is_set():
        step()

sc = threading.Thread(target=scraper)
sc.start()
start = time.monotonic()
at = lambda s: start + s
d = connect("disk0")
r = connect("r0")
k = [0]

def disk_step(cold=False):
    off = (k[0] % 4096) * 4096
    d.pwrite(os.urandom(4096), off)
    d.pread(4096, off)
    if cold:
        d.pread(65536, (64 << 20) + (k[0] * 65536) % (128 << 20))
    if k[0] % 50 == 0:
        d.flush()
    k[0] += 1
    time.sleep(0.004)

def disk_loop(deadline, cold):
    until(deadline, lambda: disk_step(cold))

# 0-8 s: disk0 alone.
disk_loop(at(8), False)
# 8-20 s: a fast writer on the slow remote, disk0 reading meanwhile.
bg = threading.Thread(target=disk_loop, args=(at(20), False))
bg.start()
j = [0]
def remote_step():
    r.pwrite(os.urandom(256 << 10), (j[0] * (256 << 10)) % (192 << 20))
    j[0] += 1
    if j[0] % 40 == 0:
        r.flush()
until(at(20), remote_step)
bg.join()
# 20-26 s: every write to the remote fails.
open(t + "/errors-on", "w").close()
for i in range(8):
    r.pwrite(os.urandom(256 << 10), (200 << 20) + i * (256 << 10))
def flush_every(secs):
    def step():
        try:
            r.flush()
        except nbd.Error:
            pass                # while the errors last
        time.sleep(secs)
    return step
bg = threading.Thread(target=disk_loop, args=(at(26), False))
bg.start()
until(at(26), flush_every(0.5))
bg.join()
# 26-36 s: the errors stop; disk0 reads a cold area.
os.unlink(t + "/errors-on")
bg = threading.Thread(target=disk_loop, args=(at(36), True))
bg.start()
until(at(36), flush_every(1))
bg.join()
time.sleep(1)
stop.set()
sc.join()
d.shutdown()
r.shutdown()
print("metrics-series: %d scrapes in %s" % (sum(1 for _ in open(series)), series))
PY
/usr/bin/python3 "$here/metrics-dashboard.py" "$SERIES" "$OUT"
echo "metrics-series: drew $OUT"
