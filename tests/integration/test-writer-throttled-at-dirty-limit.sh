#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A writer is throttled at the dirty limit.  Cache 32M, dirty_bytes 8M,
# background 4M, periodic writeback off.
#  1. Slow device: export "slow" is backed by a file whose writes are slow
#     (nbdkit memory + delay filter, mounted with nbdfuse).  A libnbd writer
#     streams 48M in 1M writes, one at a time, far faster than the device
#     takes them.  The cache's dirty data, sampled through the control
#     socket while the writer runs, reaches the limit less one request and
#     never passes it by more than one request, and writes are held; the
#     data acknowledged but not yet on the backing file never exceeds the
#     limit plus the request in flight plus the writeback runs in flight;
#     everything is there after FLUSH.  The log says writers were held or
#     paced, once (at most once in 10 s).
#  2. Fast device: nbdcopy streams 200M into export "fast" (a local file)
#     with many requests in flight: it completes, the data verifies through
#     wbd and on the backing file after FLUSH, wbd logs no warning, and its
#     RSS stays under the cache size + 64M.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
need nbdcopy cmp

start_slow_file "$T/slow" 48M 80ms
add_export_mode slow 48M writeback "$SLOW_FILE"
add_export_mode fast 200M writeback
write_cache_config 32M 'dirty_background_bytes = "4M"; dirty_bytes = "8M"; dirty_writeback_centisecs = 0; max_workers = 2;'
start_wbd -v

# Not `ldd | grep -q`: under pipefail, grep leaving at the first match can
# make ldd die of SIGPIPE, and the sanitized build was taken for a plain one.
sanitized=
if [[ $(ldd "$WBD" 2>/dev/null) =~ lib(a|ub|t)san ]]; then
	sanitized=1
fi

log "slow device: one writer, one 1M request at a time"
slow_start=$(date +%s)
"$PYTHON" - "$(uri_unix slow)" "$SLOW_FILE" "$T/control.sock" <<'PY' || fail "see above"
import json, nbd, os, socket, sys, threading, time
uri, backing, ctl = sys.argv[1:4]
MiB = 1 << 20
limit = 8 * MiB
# The request in flight, one 1M writeback run per worker (2), rounding.
slack = 1 * MiB + 2 * MiB + 64 * 1024
# A write held by the throttle waits at least one 10 ms poll (or a pause
# of its own); one that is not takes a fraction of that.
HELD_S = 0.010

def status(s, rd):
    s.sendall(b'{"v": 1, "cmd": "status"}\n')
    return json.loads(rd.readline())

c = socket.socket(socket.AF_UNIX)
c.connect(ctl)
crd = c.makefile("rb")
if status(c, crd)["thresholds"]["dirty_bytes"] != limit:
    sys.exit("FAIL: the dirty limit is not 8M")

# The cache's dirty data and that under writeback (what the throttle
# looks at, as the kernel's counts NR_WRITEBACK), sampled through the
# control socket while the writer runs.  One writer, one request at a
# time: it may pass the limit by the request that crossed it, no more.
peak_dirty = 0
writing = True
def sample():
    global peak_dirty
    while writing:
        st = status(c, crd)["cache"]
        peak_dirty = max(peak_dirty,
                         st["dirty_bytes"] + st["writeback_bytes"])
        time.sleep(0.005)
sampler = threading.Thread(target=sample)
sampler.start()

def check_backing(shadow):
    # Acknowledged bytes that are not on the backing file yet.
    f.seek(0)
    data = f.read(len(shadow))
    dirty = 0
    for off in range(0, len(shadow), MiB):
        if data[off:off + MiB] != shadow[off:off + MiB]:
            dirty += sum(4096 for p in range(off, off + MiB, 4096)
                         if data[p:p + 4096] != shadow[p:p + 4096])
    return dirty

h = nbd.NBD()
h.connect_uri(uri)
shadow = bytearray()
f = open(backing, "rb", buffering=0)
worst = 0
held = 0
t0 = time.monotonic()
try:
    for i in range(48):
        buf = os.urandom(MiB)
        t = time.monotonic()
        h.pwrite(buf, i * MiB)
        held += time.monotonic() - t >= HELD_S
        shadow += buf
        # Checked after every 16M: reading the backing file takes a
        # while, and the writer must run long enough between two checks
        # to reach the limit.
        if i % 16 != 15:
            continue
        dirty = check_backing(shadow)
        worst = max(worst, dirty)
        if dirty > limit + slack:
            sys.exit("FAIL: after %d MiB acknowledged, %d KiB are not on "
                     "the backing file: more than the 8M dirty limit allows"
                     % (i + 1, dirty // 1024))
finally:
    writing = False
    sampler.join()
    c.close()
print("48M written in %.1f s; at most %d KiB acknowledged but not on the "
      "device; cache dirty data peaked at %d KiB (limit 8192 KiB); %d of "
      "48 writes held" % (time.monotonic() - t0, worst // 1024,
      peak_dirty // 1024, held))
if peak_dirty > limit + MiB:
    sys.exit("FAIL: the cache's dirty data reached %d KiB: the writer was "
             "not held at the 8192 KiB limit" % (peak_dirty // 1024))
if peak_dirty < limit - MiB:
    sys.exit("FAIL: the cache's dirty data peaked at %d KiB: the writer "
             "never reached the 8192 KiB limit (less one request)"
             % (peak_dirty // 1024))
if held == 0:
    sys.exit("FAIL: no write was held")
h.flush()
f.seek(0)
if f.read(len(shadow)) != shadow:
    sys.exit("FAIL: after FLUSH the backing file differs")
h.shutdown()
PY
# Throttling biting is said in the log, once in 10 s at most.
n=$(grep -Ec 'export "slow": writes (held|paced, [0-9]+ ms each): [0-9]+ bytes dirty in the cache \(dirty limit 8388608\)' "$LOG" || true)
((n >= 1)) || fail "the throttled writes were not logged"
max=$((($(date +%s) - slow_start) / 10 + 1))
((n <= max)) || fail "throttling logged $n times in $(($(date +%s) - slow_start)) s (at most once in 10 s)"

log "fast device: nbdcopy, 200M with many requests in flight"
head -c 200M /dev/urandom >"$T/in.bin"
nbdcopy --requests=64 "$T/in.bin" "$(uri_unix fast)" >"$T/copy.out" 2>&1 &
copy_pid=$!
_PIDS+=("$copy_pid")
max_rss=0
while proc_alive "$copy_pid"; do
	rss=$(vmrss_kib "$WBD_PID") || break
	((rss > max_rss)) && max_rss=$rss
	sleep 0.1
done
wait_exit "$copy_pid" 120 || fail "nbdcopy did not finish"
[[ $EXIT_STATUS == 0 ]] || fail "nbdcopy into the export failed: $(cat "$T/copy.out")"
log "wbd's peak RSS during the copy: $((max_rss / 1024)) MiB"
if [[ -z $sanitized ]]; then
	((max_rss < (32 + 64) * 1024)) ||
		fail "wbd's RSS reached $((max_rss / 1024)) MiB with a 32M cache (allowed 96 MiB)"
else
	log "sanitized build: RSS bound not checked"
fi
nbdcopy "$(uri_unix fast)" "$T/out.bin" || fail "nbdcopy out of the export failed"
cmp "$T/in.bin" "$T/out.bin" || fail "data read back through wbd differs"
"$PYTHON" -c 'import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1]); h.flush(); h.shutdown()' "$(uri_unix fast)" ||
	fail "FLUSH failed"
cmp "$T/in.bin" "$T/fast.img" || fail "after FLUSH the backing file differs"
if grep -Eqi 'warn|error|fail' "$LOG"; then
	fail "wbd logged warnings during the run: $(grep -Ei 'warn|error|fail' "$LOG")"
fi
stop_wbd
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with status $EXIT_STATUS"
