#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The metrics read by Prometheus's own parser: "wbctl metrics" prints an
# exposition in which every family has HELP and TYPE and a wbd_ name,
# histograms add up, and every export (a local file and a remote behind
# nbdkit) and every device has its samples; "wbctl metrics -o FILE"
# replaces FILE whole; --json follows the protocol's schema; the HTTP
# endpoint serves the same series; "wbctl status" shows the FLUSH latency
# and pacing, and its JSON carries the same figures under the same names.
source "${SRCDIR:-$(dirname "$0")}/lib-metrics.sh"
need_python_nbd
need_prometheus
need_wbctl

start_local_and_remote http
dev=$(dev_majmin "$T/disk0.img")

"$PYTHON" - "$(uri_unix disk0)" "$(uri_unix r0)" "$(uri_unix j0)" <<'PY' || fail "the workload failed"
import nbd, sys
for uri in sys.argv[1:4]:
    h = nbd.NBD()
    h.connect_uri(uri)
    h.pwrite(b"x" * 65536, 0)
    h.pread(65536, 0)
    h.pread(4096, 8 << 20)
    h.flush()
    h.shutdown()
PY

expect_exit() {
	local want=$1 rc=0
	shift
	"$@" >"$T/out" 2>"$T/err" || rc=$?
	[[ $rc == "$want" ]] ||
		fail "\"$*\" exited with $rc, not $want: $(cat "$T/err")"
}

expect_exit 0 wbctl metrics
cp "$T/out" "$T/ctl.prom"
expect_exit 0 wbctl metrics -o "$T/file.prom"
[[ ! -s $T/out ]] || fail "wbctl metrics -o also printed: $(cat "$T/out")"
ls "$T" | grep -q 'file.prom.tmp' && fail "wbctl metrics -o left its temporary file"
expect_exit 0 wbctl --json metrics
"$MPY" "$SRCDIR/../ctl/ctl-schema.py" metrics "$T/out" ||
	fail "wbctl --json metrics: the answer does not match the schema"
expect_exit 0 wbctl --json status
"$MPY" "$SRCDIR/../ctl/ctl-schema.py" status "$T/out" ||
	fail "wbctl --json status: the answer does not match the schema"
cp "$T/out" "$T/status.json"
expect_exit 0 wbctl status
cp "$T/out" "$T/status.txt"
curl -sf "http://127.0.0.1:$MPORT/metrics" -o "$T/http.prom" ||
	fail "curl /metrics failed"

"$MPY" - "$T" "$dev" <<'PY' || fail "see above"
import json, sys
from metrics import check_format, check_or_exit, families, samples, value
t, dev = sys.argv[1:3]
ctl = open(t + "/ctl.prom").read()
check_or_exit(check_format(ctl), "wbctl metrics")
check_or_exit(check_format(open(t + "/file.prom").read()), "wbctl metrics -o")
http = open(t + "/http.prom").read()
check_or_exit(check_format(http), "GET /metrics")

fams = families(ctl)
# Every export, every device has its samples (the remote ones only on the
# remote device).
devs = {s.labels["device"] for s in fams["wbd_device_dirty_bytes"].samples}
if len(devs) != 2 or dev not in devs:
    sys.exit("FAIL: devices %r, expected %s and a remote one" % (devs, dev))
remote = (devs - {dev}).pop()
errs = []
for name, f in fams.items():
    keys = {k for s in f.samples for k in s.labels}
    if "export" in keys:
        got = {s.labels["export"] for s in f.samples}
        # The write log's families: only j0 has one.
        want = ({"j0"} if name.startswith("wbd_export_journal_")
                else {"disk0", "r0", "j0"})
        if got != want:
            errs.append("%s: exports %r, expected %r" % (name, got, want))
    elif "device" in keys:
        got = {s.labels["device"] for s in f.samples}
        want = {remote} if name.startswith("wbd_remote_") else devs
        if got != want:
            errs.append("%s: devices %r, expected %r" % (name, got, want))
    elif not f.samples:
        errs.append("%s: no sample" % name)
check_or_exit(errs, "labels")

# The same series over HTTP.
if set(samples(http)) != set(samples(ctl)):
    sys.exit("FAIL: GET /metrics and wbctl metrics differ in their series: "
             "%r" % (set(samples(http)) ^ set(samples(ctl))))

s = samples(ctl)
for e in ("disk0", "r0", "j0"):
    for cmd, n in (("read", 2), ("write", 1), ("flush", 1)):
        got = value(s, "wbd_export_requests_total", export=e, command=cmd)
        if got != n:
            sys.exit("FAIL: %s: %d %s requests counted, %d sent" % (e, got, cmd, n))
    if value(s, "wbd_export_written_bytes_total", export=e) != 65536:
        sys.exit("FAIL: %s: written bytes" % e)
    if value(s, "wbd_export_read_bytes_total", export=e) != 65536 + 4096:
        sys.exit("FAIL: %s: read bytes" % e)
if value(s, "wbd_export_journal_commits_total", export="j0") != 1:
    sys.exit("FAIL: j0's FLUSH is not counted as a write log commit")
if value(s, "wbd_export_journal_logged_bytes_total", export="j0") != 65536:
    sys.exit("FAIL: j0's write log did not take its 64 KiB")
if value(s, "wbd_remote_connected", device=remote) != 1:
    sys.exit("FAIL: the remote is not shown connected")
# r0's FLUSH reached its remote: by a flush, or by one write with FUA.
if (value(s, "wbd_device_flushes_sent_total", device=remote) +
        value(s, "wbd_device_flushes_by_fua_total", device=remote)) < 1:
    sys.exit("FAIL: no flush of the remote counted for r0's FLUSH")
# r0's read of 4 KiB at 8 MiB missed: the remote's read window measured it.
if value(s, "wbd_device_read_window_reads", device=remote) < 1:
    sys.exit("FAIL: the remote's read window is not shown")

# wbctl status --json: the same figures, under the same names, per export
# and for all of them.
st = json.load(open(t + "/status.json"))
flushes = 0
for e in st["exports"]:
    n = value(s, "wbd_export_request_duration_seconds_count",
              export=e["name"], op="flush")
    if e["flushes"] != n:
        sys.exit("FAIL: status says %s had %d flushes, metrics %d"
                 % (e["name"], e["flushes"], n))
    if not 0 < e["flush_p50_us"] <= e["flush_p99_us"]:
        sys.exit("FAIL: %s: flush p50 %d us, p99 %d us"
                 % (e["name"], e["flush_p50_us"], e["flush_p99_us"]))
    if e["paced_writes"] != value(s, "wbd_throttle_paced_writes_total",
                                  export=e["name"]):
        sys.exit("FAIL: %s: paced writes differ" % e["name"])
    flushes += n
if st["requests"]["flushes"] != flushes:
    sys.exit("FAIL: status requests.flushes %d, metrics %d"
             % (st["requests"]["flushes"], flushes))
print("%d families, %d samples" % (len(fams), len(s)))
PY
grep -Eq '^  flush latency +p50 [0-9.]+ (us|ms|s), p99 [0-9.]+ (us|ms|s) over 3 FLUSHes$' "$T/status.txt" ||
	fail "wbctl status: no FLUSH latency line: $(cat "$T/status.txt")"
grep -Eq '^  pacing +0 write\(s\) paced, 0 held at the dirty limit, 0\.0 s paused in all; 0 now$' "$T/status.txt" ||
	fail "wbctl status: no pacing line: $(cat "$T/status.txt")"
assert_alive
