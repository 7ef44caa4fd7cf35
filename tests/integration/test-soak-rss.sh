#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The soak (suite "soak", not in the default run: `meson test -C build
# --suite soak`, about 11 minutes; SOAK_SECONDS changes its length): for
# SOAK_SECONDS (600) wbd serves, all at once,
#
#   - a well-behaved client: fio's nbd engine, 4K-64K random reads and
#     writes at QD8, rate-limited so that the machine is not only busy;
#   - a disconnect storm: 16 clients at a time that each send four 1 MiB
#     WRITEs and ask for four 1 MiB READs, then hang up with a reset;
#   - stuck readers: every 15 s, 8 connections that pipeline 4 MiB READs
#     and never read a reply (freed by limits.stall_timeout_s, here 5);
#   - handshake churn: LIST, a GO then a reset, a handshake cut short;
#   - wbctl status every 5 s;
#
# The hostile clients are another user (nobody, over TCP: this host's TCP
# clients are counted by the user owning the socket) than the good one
# (root, on the Unix socket): one client's connections share its part of
# the budget (wbd.conf(5), limits.max_client_share), which the stuck
# readers hold, and the good client is timed by fio.  Hence root only.
#
# Its RSS is sampled every 5 s, with where its memory is (wbctl status:
# memory), printed a line a minute.  It must stay within the bound of
# wbd.conf(5) (limits.max_inflight_bytes): over its start (the cache is
# faulted in before), at most the budget (64 MiB here) + 130 KiB for each
# connection (at most about 64 at once here) + the buffers the threads
# keep (at most 32 MiB all together, which memory.buffers_kept_bytes must
# show) + SOAK_SLACK_MIB (96) for malloc's own; twice that under ASan.
# And it must not creep: over the last five minutes, the least-squares
# slope of RSS less the buffers in flight and kept (each within its bound,
# coming and going by design; wbctl status: limits, memory) is under
# SOAK_SLOPE_MIB_PER_MIN (1 MiB a minute): a leak, or memory malloc keeps,
# shows there; the slope of RSS itself is under SOAK_RSS_SLOPE_MIB_PER_MIN
# (2: the buffers in flight at a sample's moment swing by 15-30 MiB, and
# two runs of one commit gave RSS slopes of -0.12 and 1.68 MiB a minute);
# the slope of malloc's free bytes is under SOAK_SLOPE_MIB_PER_MIN too
# (holes left in its arenas: the creep this soak found last); and no
# sample is more than 32 MiB above the highest of the minutes before
# them.
# (Before malloc's arenas were limited and trimmed, a 10-minute soak went
# from 139 to 445 MiB, still rising 4-5 MiB a minute at its end; then,
# with up to 16 MiB kept by each thread and none for all together, from
# 140 to 222 MiB in 5 minutes, 7.3 MiB a minute over the last half: the
# kept buffers, 33 to 53 MiB, as each thread's stash grew to the largest
# sizes it had seen.)  At the end the data the good client wrote is
# checked by fio's verify pass, and wbd is stopped cleanly.
# (Then, with requests' buffers in malloc's arenas, one arena went from 35
# to 63 MiB mapped in ten minutes and malloc's free bytes from 50 to 83
# MiB, which malloc_trim could not give back: RSS slopes of 0.9 to 2.8
# MiB a minute.  With buffers of 64 KiB and more mapped for themselves
# (bufstash.h), malloc's free bytes stayed at 2-6 MiB and RSS at 177 MiB
# from the third minute on, but for what was in flight at a sample.)
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
need fio

: "${SOAK_SECONDS:=600}"
: "${SOAK_SLACK_MIB:=96}"
: "${SOAK_SLOPE_MIB_PER_MIN:=1}"
: "${SOAK_RSS_SLOPE_MIB_PER_MIN:=2}"
((SOAK_SECONDS >= 120)) || fail "SOAK_SECONDS=$SOAK_SECONDS: at least 120"
((EUID == 0)) || skip "the hostile clients must be another user: run as root"
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"

add_export d 256M rw
write_cache_config 128M ''
echo 'limits = { max_inflight_bytes = "64M"; stall_timeout_s = 5; };' >>"$CONF"
KEPT_MAX_MIB=32 # BUFSTASH_ALL_BYTES (bufstash.h)
rss_bound $((64 + (64 * 130 + 1023) / 1024 + KEPT_MAX_MIB + SOAK_SLACK_MIB))
start_wbd
before=$(vmrss_kib "$WBD_PID")
log "RSS at start: $before KiB; soaking for $SOAK_SECONDS s"

# The good client: the first 128 MiB of the export, verified at the end.
fio --name=good --ioengine=nbd --uri="$(uri_unix d)" --rw=randrw \
	--bsrange=4k-64k --iodepth=8 --size=128M --time_based \
	--runtime="$SOAK_SECONDS" --rate=8m,8m --norandommap \
	--output="$T/fio-good.out" >/dev/null 2>&1 &
FIO_PID=$!

"$PYTHON" - "$SOCK" "$WBD_PID" "$T/rss" "$SRCDIR" "$SOAK_SECONDS" "$WBCTL" "$T/control.sock" "$PORT" <<'PY' || fail "see above"
import json, os, socket, struct, subprocess, sys, threading, time
sock, pid, rss_path, srcdir = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
seconds, wbctl, ctl, port = int(sys.argv[5]), sys.argv[6], sys.argv[7], int(sys.argv[8])
sys.path.insert(0, srcdir)
import nbdraw

end = time.monotonic() + seconds
errors = []

# seteuid is the whole process's: whatever opens a file or a socket, or
# starts a program, holds the lock, so that it never runs as nobody.
euid_lock = threading.Lock()

def hostile():
    """A raw connection over TCP whose socket belongs to nobody."""
    c = nbdraw.Raw.__new__(nbdraw.Raw)
    with euid_lock:
        os.seteuid(65534)
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        finally:
            os.seteuid(0)
    s.settimeout(nbdraw.TIMEOUT)
    s.connect(("127.0.0.1", port))
    c.s, c.structured = s, False
    return c

def rss():
    for l in open("/proc/%d/status" % pid):
        if l.startswith("VmRSS"):
            return int(l.split()[1])

def memory():
    """wbctl status's memory (KiB): malloc's in use and free, the
    buffers the threads keep, the requests' buffers in flight and the
    connections' read buffers (limits); and the daemon's threads."""
    try:
        with euid_lock:
            out = subprocess.run([wbctl, "-s", ctl, "status", "--json"],
                                 capture_output=True, text=True,
                                 timeout=30).stdout
        j = json.loads(out)
        m, l = j["memory"], j["limits"]
        got = [m["malloc_in_use_bytes"] // 1024,
               m["malloc_free_bytes"] // 1024,
               m["buffers_kept_bytes"] // 1024,
               (l["inflight_bytes"] + l["inflight_small_bytes"] +
                l["connection_buffer_bytes"]) // 1024]
    except (subprocess.SubprocessError, ValueError, KeyError):
        got = [-1, -1, -1, -1]
    return got + [len(os.listdir("/proc/%d/task" % pid))]

def reset(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()

def guarded(fn):
    def run():
        try:
            while time.monotonic() < end:
                fn()
        except Exception as e:          # a hostile client's own failure
            errors.append("%s: %r" % (fn.__name__, e))
    return threading.Thread(target=run, daemon=True)

payload = os.urandom(1 << 20)
def storm():
    conns = []
    for i in range(16):
        c = hostile()
        c.open("d")
        c.s.settimeout(0.2)
        try:
            for k in range(4):
                c.request(1, (128 << 20) + ((i * 4 + k) % 64 << 20), 1 << 20,
                          payload=payload, handle=k)
            for k in range(4):
                c.request(0, (128 << 20) + ((i * 4 + k) % 64 << 20), 1 << 20,
                          handle=10 + k)
        except OSError:
            pass                        # the budget is full: not read
        conns.append(c)
    for c in conns:
        reset(c.s)
    time.sleep(0.5)

def stuck():
    conns = []
    for i in range(8):
        c = hostile()
        c.open("d")
        c.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.s.settimeout(0.2)
        try:
            for k in range(8):
                c.request(0, (192 << 20) + (k << 22), 4 << 20, handle=k)
        except OSError:
            pass
        conns.append(c)
    t = time.monotonic() + 15
    while time.monotonic() < min(t, end):
        time.sleep(0.5)
    for c in conns:
        try:
            reset(c.s)
        except OSError:
            pass

def churn():
    # LIST, then abort.
    with euid_lock:
        subprocess.run(["nbdinfo", "--list", "nbd+unix:///?socket=" + sock],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=30)
    # A GO, then a reset.
    c = hostile()
    c.open("d")
    reset(c.s)
    # A handshake cut short.
    c = hostile()
    c.s.recv(18)
    reset(c.s)
    time.sleep(0.1)

def status():
    with euid_lock:
        subprocess.run([wbctl, "-s", ctl, "status"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=30)
    time.sleep(5)

out = open(rss_path, "w")
threads = [guarded(f) for f in (storm, stuck, churn, status)]
for t in threads:
    t.start()
start = time.monotonic()
with out:
    while time.monotonic() < end:
        out.write("%.1f %d %d %d %d %d %d\n" % ((time.monotonic() - start,
                                               rss()) + tuple(memory())))
        out.flush()
        time.sleep(5)
for t in threads:
    t.join(60)
for e in errors:
    print("hostile client: " + e)
PY
wait "$FIO_PID" || fail "the good client (fio) failed: $(grep -E 'err|error' "$T/fio-good.out" | head -3)"
assert_alive
# Idle: what the soak freed goes back to the kernel (the tick trims
# malloc's arenas every 10 s); malloc's own count of bytes in use, in the
# log, tells memory still held from memory malloc keeps free.
sleep 25
after=$(vmrss_kib "$WBD_PID")
command -v gdb >/dev/null 2>&1 &&
	{ gdb -p "$WBD_PID" -batch -ex 'call (void)malloc_stats()' >/dev/null 2>&1 || true; }
log "RSS 25 s after the soak: $after KiB (start $before KiB); malloc: $(grep -A2 '^Total' "$LOG" | tail -2 | tr -s ' \n' ' ')"

"$PYTHON" - "$T/rss" "$before" "$RSS_BOUND_MIB" "$SOAK_SLOPE_MIB_PER_MIN" "$KEPT_MAX_MIB" "$SOAK_RSS_SLOPE_MIB_PER_MIN" <<'PY' || fail "see above"
import sys
samples = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
rows = [(x[0], x[1]) for x in samples]
before, bound_mib, max_slope = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
kept_max_mib, max_rss_slope = int(sys.argv[5]), float(sys.argv[6])
# Where the memory is, a line a minute: RSS, malloc's bytes in use and
# free, the buffers the threads keep, the requests' and connections'
# buffers (wbctl status: memory, limits), threads.
print("   s  RSS MiB  malloc in use  malloc free  kept  in flight  threads")
for x in samples:
    if int(x[0]) % 60 < 5 or x is samples[-1]:
        print("%4d  %7d  %13d  %11d  %4d  %9d  %7d"
              % (x[0], x[1] // 1024, x[2] // 1024, x[3] // 1024,
                 x[4] // 1024, x[5] // 1024, x[6]))
kept = max(x[4] for x in samples) // 1024
if kept > kept_max_mib:
    sys.exit("FAIL: the threads kept %d MiB of buffers, more than their "
             "bound (%d MiB)" % (kept, kept_max_mib))
peak = max(r for _, r in rows)
print("RSS: start %d MiB, peak %d MiB (+%d MiB, bound +%d MiB), end %d MiB"
      % (before // 1024, peak // 1024, (peak - before) // 1024, bound_mib,
         rows[-1][1] // 1024))
if peak - before > bound_mib * 1024:
    sys.exit("FAIL: RSS grew by %d MiB over its start, more than the bound"
             % ((peak - before) // 1024))
t_end = rows[-1][0]
window = min(300, t_end / 2)    # a shorter soak: its second half

def slope(points):
    """The least-squares slope of (seconds, MiB) POINTS, in MiB/min."""
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mr = sum(r for _, r in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (r - mr) for t, r in points) / var * 60 if var else 0

last = [(t, r / 1024) for t, r in rows if t >= t_end - window]
earlier = [r / 1024 for t, r in rows if t < t_end - window]
# The rest: RSS less the buffers that come and go by design, each within
# its own bound (in flight: limits.max_inflight_bytes and the connections'
# read buffers; kept: BUFSTASH_ALL_BYTES), sampled with it.
rest = [(x[0], (x[1] - x[4] - x[5]) / 1024) for x in samples
        if x[0] >= t_end - window and x[4] >= 0 and x[5] >= 0]
s_rss, s_rest = slope(last), slope(rest)
print("last %d s: %d samples; slope of RSS %.2f MiB/min (at most %.2f), "
      "of RSS less the buffers in flight and kept %.2f MiB/min (at most %.2f)"
      % (window, len(last), s_rss, max_rss_slope, s_rest, max_slope))
if s_rest >= max_slope:
    sys.exit("FAIL: RSS less the buffers in flight and kept still rises "
             "%.2f MiB a minute over the last %d s" % (s_rest, window))
if s_rss >= max_rss_slope:
    sys.exit("FAIL: RSS still rises %.2f MiB a minute over the last %d s"
             % (s_rss, window))
# malloc's free bytes (0 under a sanitizer, whose malloc is its own).
s_free = slope([(x[0], x[3] / 1024) for x in samples
                if x[0] >= t_end - window and x[3] >= 0])
print("slope of malloc's free bytes %.2f MiB/min (at most %.2f)"
      % (s_free, max_slope))
if s_free >= max_slope:
    sys.exit("FAIL: malloc's free bytes rise %.2f MiB a minute over the "
             "last %d s: holes in its arenas" % (s_free, window))
if earlier and max(r for _, r in last) > max(earlier) + 32:
    sys.exit("FAIL: RSS in the last %d s (peak %d MiB) went more than "
             "32 MiB above the minutes before (%d MiB)"
             % (window, max(r for _, r in last), max(earlier)))
PY

# What the good client wrote reads back as written.
fio --name=good --ioengine=nbd --uri="$(uri_unix d)" --rw=randwrite \
	--bs=64k --iodepth=8 --size=32M --verify=crc32c --do_verify=1 \
	--output="$T/fio-verify.out" >/dev/null 2>&1 ||
	fail "fio verify after the soak failed: $(tail -5 "$T/fio-verify.out")"
check_logs_clean
stop_wbd
log "PASS"
