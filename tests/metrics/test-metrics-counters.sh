#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The counters move as they should under a scripted workload, scraped
# after each phase: exact where the client can count (requests by command,
# their errors, bytes read and written, latency observations by kind,
# bytes written back by reason), and no counter or histogram sample ever
# goes down.
#  A. disk0 (a local file): page-aligned writes that land in the cache,
#     FUA writes, reads that hit and reads that miss, FLUSH, TRIM, a READ
#     and a WRITE past the end (refused: counted as errors).
#  B. r0 (a remote behind nbdkit, one thread, 200 ms a write): a writer
#     far faster than writeback, with a 4M dirty limit, is paced.
#  C. nbdkit fails every write (its error filter): FLUSH fails, the
#     device counts failed runs and errors, the export its writeback
#     errors.
#  D. the errors stop: FLUSH succeeds again.
source "${SRCDIR:-$(dirname "$0")}/lib-metrics.sh"
need_python_nbd
need_prometheus
need_wbctl

ERRS=$T/errors-on
start_nbdkit kit --threads=1 --filter=error --filter=delay memory 32M \
	delay-write=200ms error-pwrite=EIO error-pwrite-rate=100% \
	error-pwrite-file="$ERRS"
add_export disk0 16M rw
add_remote_export r0 "$(kit_uri "$KIT_SOCK")"
write_cache_config 32M 'dirty_background_bytes = "2M"; dirty_bytes = "4M"; dirty_writeback_centisecs = 0;'
# Write-behind stays on (the default): B's writer is paced all the same,
# the throttle counting pages under writeback with the dirty ones.
start_wbd
dev=$(dev_majmin "$T/disk0.img")

"$PYTHON" - "$(uri_unix disk0)" "$(uri_unix r0)" "$T" "$ERRS" "$dev" <<'PY' || fail "see above"
import nbd, os, subprocess, sys, time
sys.path.insert(0, os.environ["PYTHONPATH"].split(":")[0])
from metrics import check_or_exit, check_format, monotonic, samples, value
import metrics

uri0, uri_r, t, errs_file, dev = sys.argv[1:6]
ctl = t + "/control.sock"
KiB, MiB = 1024, 1 << 20
scrapes = []

def scrape(phase):
    text = metrics.scrape_ctl(ctl)
    check_or_exit(check_format(text), "phase %s" % phase)
    if scrapes:
        check_or_exit(monotonic(scrapes[-1], text),
                      "from phase %s to %s" % (len(scrapes), phase))
    scrapes.append(text)
    return samples(text)

# What the client sent, per export.
sent = {e: {"req": {}, "err": {}, "read": 0, "written": 0, "ops": {}}
        for e in ("disk0", "r0")}

def note(e, cmd, n=0, failed=False, op=None):
    s = sent[e]
    s["req"][cmd] = s["req"].get(cmd, 0) + 1
    if failed:
        s["err"][cmd] = s["err"].get(cmd, 0) + 1
    elif cmd == "read":
        s["read"] += n
    elif cmd == "write":
        s["written"] += n
    if op and not failed or op == "flush":
        s["ops"][op] = s["ops"].get(op, 0) + 1

def check_sent(s, e):
    got = lambda name, **kw: value(s, name, export=e, **kw)
    errs = []
    for cmd in ("read", "write", "flush", "trim", "write_zeroes", "cache",
                "block_status", "other"):
        for kind, name in (("req", "wbd_export_requests_total"),
                           ("err", "wbd_export_request_errors_total")):
            want = sent[e][kind].get(cmd, 0)
            if got(name, command=cmd) != want:
                errs.append("%s{%s}: %r, the client sent %d"
                            % (name, cmd, got(name, command=cmd), want))
    for what, name in (("read", "wbd_export_read_bytes_total"),
                       ("written", "wbd_export_written_bytes_total")):
        if got(name) != sent[e][what]:
            errs.append("%s: %r, the client %s %d"
                        % (name, got(name), what, sent[e][what]))
    for op in ("read_hit", "read_miss", "write", "flush", "fua"):
        want = sent[e]["ops"].get(op, 0)
        n = got("wbd_export_request_duration_seconds_count", op=op)
        if n != want:
            errs.append("latency observations of %s: %r, expected %d"
                        % (op, n, want))
    check_or_exit(errs, e)

def wb(s, device, what, reason):
    return value(s, "wbd_device_writeback_%s_total" % what, device=device,
                 reason=reason)

# --- A: disk0, exact counts ------------------------------------------------
h = nbd.NBD()
h.set_strict_mode(0)            # let the refused requests reach wbd
h.connect_uri(uri0)
size = h.get_size()
for k in range(10):             # whole pages: they land in the cache
    h.pwrite(b"a" * 4096, k * 8192)
    note("disk0", "write", 4096, op="write")
for k in range(3):
    h.pwrite(b"f" * 65536, 1 * MiB + k * 65536, nbd.CMD_FLAG_FUA)
    note("disk0", "write", 65536, op="fua")
for k in range(5):              # cached: hits
    if h.pread(4096, k * 8192) != b"a" * 4096:
        sys.exit("FAIL: read back wrong")
    note("disk0", "read", 4096, op="read_hit")
for k in range(4):              # never cached: misses
    h.pread(8192, 8 * MiB + k * 65536)
    note("disk0", "read", 8192, op="read_miss")
for k in range(2):
    h.flush()
    note("disk0", "flush", op="flush")
if h.can_trim():
    h.trim(MiB, 12 * MiB)
    note("disk0", "trim")
for cmd, call in (("read", lambda: h.pread(4096, size)),
                  ("write", lambda: h.pwrite(b"z" * 4096, size))):
    try:
        call()
        sys.exit("FAIL: a %s past the end succeeded" % cmd)
    except nbd.Error:
        note("disk0", cmd, failed=True)
s = scrape("A")
check_sent(s, "disk0")
# Written back: the ten 4K pages (apart) by the FLUSH, the FUA writes' own
# 192K by themselves; nothing else was dirty.
want = {"flush": (40 * KiB, 10), "fua": (192 * KiB, 3)}
for reason in ("background", "periodic", "flush", "fua", "shutdown", "sync"):
    b, r = want.get(reason, (0, 0))
    if (wb(s, dev, "bytes", reason), wb(s, dev, "runs", reason)) != (b, r):
        sys.exit("FAIL: %s writeback of %s: %r bytes in %r runs, expected "
                 "%d in %d" % (reason, dev, wb(s, dev, "bytes", reason),
                 wb(s, dev, "runs", reason), b, r))
if value(s, "wbd_device_writeback_runs_in_flight", device=dev) != 0:
    sys.exit("FAIL: runs in flight on an idle device")

# --- B: r0, a throttled writer -------------------------------------------
r = nbd.NBD()
r.connect_uri(uri_r)
for k in range(48):
    r.pwrite(os.urandom(256 * KiB), k * 256 * KiB)
    note("r0", "write", 256 * KiB, op="write")
r.flush()
note("r0", "flush", op="flush")
s = scrape("B")
check_sent(s, "r0")
remote = [d for (n, l), v in s.items() if n == "wbd_remote_connected"
          for k, d in l][0]
paced = value(s, "wbd_throttle_paced_writes_total", export="r0")
pause = value(s, "wbd_throttle_pause_seconds_total", export="r0")
if paced < 1 or pause <= 0:
    sys.exit("FAIL: a writer 10 times faster than writeback was not paced "
             "(%r writes paced, %r s)" % (paced, pause))
if value(s, "wbd_throttle_writes_paced", export="r0") != 0:
    sys.exit("FAIL: writes still shown paced once the writer is done")
total = sum(wb(s, remote, "bytes", x) for x in
            ("background", "periodic", "flush", "fua", "shutdown", "sync"))
if total != 12 * MiB:
    sys.exit("FAIL: %d bytes written back to the remote, 12M were written "
             "once each" % total)
print("B: %d of 48 writes paced, %.2f s in all" % (paced, pause))

# --- C: every write to the remote fails ------------------------------------
open(errs_file, "w").close()
r.pwrite(os.urandom(MiB), 16 * MiB)
note("r0", "write", MiB, op="write")
failed = 0
for k in range(2):
    try:
        r.flush()
        sys.exit("FAIL: FLUSH succeeded while every write fails")
    except nbd.Error:
        failed += 1
        note("r0", "flush", failed=True, op="flush")
s = scrape("C")
check_sent(s, "r0")
for name, labels in (("wbd_device_writeback_errors_total", {"device": remote}),
                     ("wbd_device_writeback_failed_runs_total",
                      {"device": remote}),
                     ("wbd_export_writeback_errors_total", {"export": "r0"})):
    if value(s, name, **labels) < 1:
        sys.exit("FAIL: %s%r did not count the failures" % (name, labels))
if value(s, "wbd_export_at_risk_bytes", export="r0") < MiB:
    sys.exit("FAIL: the 1M that cannot be written back is not at risk")

# --- D: the errors stop ----------------------------------------------------
os.unlink(errs_file)
end = time.monotonic() + 60
while True:
    try:
        r.flush()
        note("r0", "flush", op="flush")
        break
    except nbd.Error:
        note("r0", "flush", failed=True, op="flush")
        if time.monotonic() > end:
            sys.exit("FAIL: FLUSH still failing 60 s after the errors stopped")
        time.sleep(0.2)
s = scrape("D")
check_sent(s, "r0")
check_sent(s, "disk0")
total = sum(wb(s, remote, "bytes", x) for x in
            ("background", "periodic", "flush", "fua", "shutdown", "sync"))
if total != 13 * MiB:
    sys.exit("FAIL: %d bytes written back to the remote in all, expected "
             "13M (a failed run counts when it is written)" % total)
if value(s, "wbd_export_at_risk_bytes", export="r0") != 0:
    sys.exit("FAIL: bytes still at risk after a successful FLUSH")
h.shutdown()
r.shutdown()
print("%d scrapes, counters exact and monotonic" % len(scrapes))
PY
remote_wbctl status >"$T/status.txt" || fail "wbctl status failed"
grep -Eq '^  pacing +[1-9][0-9]* write\(s\) paced, ' "$T/status.txt" ||
	fail "wbctl status shows no paced write: $(grep pacing "$T/status.txt")"
assert_alive
