#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A long shutdown drain says how it goes, every 5 s: a line for the whole
# and one for each export not finished, all counting what is left the same
# way (dirty, or being written back), so that the exports' lines add up to
# the whole's; each with the rate at which that shrank since the last
# report and the time left at that rate, "unknown" when nothing moved.
#
# Two exports on one nbdkit (its file plugin, one file per export), with
# 4 MiB and 2 MiB dirty and no writeback before SIGTERM.  The remote is
# paused when the signal comes: the first report finds all 6 MiB left, part
# of it being written, and no progress.  Then it is let go at 512 KiB/s (its
# rate filter): at that rate the drain outlasts the next report, which
# gives a rate and a time left.  The data reaches the remote.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_pause_filter
need cmp
nbdkit --filter=rate null --dump-plugin >/dev/null 2>&1 ||
	skip "nbdkit's rate filter (nbdkit-rate-filter) is not installed"

mkdir "$T/kit"
truncate -s 8M "$T/kit/a" "$T/kit/b"
# 4 Mbit/s, 512 KiB/s (after a first burst of 2 s): 6 MiB take 10 s.
start_nbdkit kit --filter=pause --filter=rate file dir="$T/kit" \
	rate=4M pause-control="$T/pause.ctl"
use_pause_control "$T/pause.ctl"
add_remote_export a "$(kit_uri "$KIT_SOCK" a)"
add_remote_export b "$(kit_uri "$KIT_SOCK" b)"
write_cache_config 64M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
# A paused remote must not look dead while the first report is awaited.
# Dirty data waits for the FLUSH (or the drain): no write-behind.
add_remote_settings 'io_timeout_ms = 300000; write_behind = false;'
start_wbd

head -c 4M /dev/urandom >"$T/data-a"
head -c 2M /dev/urandom >"$T/data-b"
"$PYTHON" - "$(uri_unix a)" "$T/data-a" "$(uri_unix b)" "$T/data-b" <<'PY' || fail "see above"
import nbd, sys
for uri, path in ((sys.argv[1], sys.argv[2]), (sys.argv[3], sys.argv[4])):
    h = nbd.NBD()
    h.connect_uri(uri)
    h.pwrite(open(path, "rb").read(), 0)
    h.shutdown()                # no FLUSH: the data stays dirty
PY
cmp -s -n $((2 << 20)) "$T/data-b" "$T/kit/b" &&
	fail "the data reached the remote before SIGTERM; this test cannot see the drain"

pause_ctl "$T/pause.ctl" p
kill -TERM "$WBD_PID"
for ((i = 0; i < 600; i++)); do
	grep -q 'stopping: writing back, .* left' "$LOG" && break
	proc_alive "$WBD_PID" || fail "wbd exited with its remote paused"
	sleep 0.1
done
((i < 600)) || fail "no drain report within 60 s of SIGTERM"
pause_ctl "$T/pause.ctl" r
wait_exit "$WBD_PID" 120 || fail "wbd still running 120 s after SIGTERM"
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited $EXIT_STATUS after writing everything back, expected 0"
cmp -s -n $((4 << 20)) "$T/data-a" "$T/kit/a" || fail "the remote does not hold export a's data"
cmp -s -n $((2 << 20)) "$T/data-b" "$T/kit/b" || fail "the remote does not hold export b's data"

# One owner reports: no other line counts what is left another way.
grep -q 'still dirty' "$LOG" && fail "another progress line: $(grep 'still dirty' "$LOG")"
grep -E 'stopping: (writing back, |export "[ab]" \(device )' "$LOG" >"$T/reports"
log "the drain's reports:"
cat "$T/reports" >&2
"$PYTHON" - "$T/reports" <<'PY' || fail "see above"
import re, sys

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
SIZE = r"([0-9.]+) (B|KiB|MiB|GiB)"
RATE = (r"(?:no progress in [0-9]+ s, time left (unknown)"
        r"|" + SIZE + r"/s, about [0-9.]+ (?:s|min|h) to go)$")
WHOLE = re.compile(r"stopping: writing back, " + SIZE + r" of dirty data "
                   r"left, ([0-9]+) export\(s\) not finished; " + RATE)
ONE = re.compile(r'stopping: export "([ab])" \(device [0-9]+:[0-9]+\): ' +
                 SIZE + r" left; " + RATE)

def size(num, unit):
    """Bytes, and how far the one-decimal rounding may be off."""
    return float(num) * UNITS[unit], 0 if unit == "B" else UNITS[unit] / 20

reports = []
for line in open(sys.argv[1]):
    m = WHOLE.search(line)
    if m:
        reports.append({"left": size(m[1], m[2]), "running": int(m[3]),
                        "unknown": bool(m[4]), "exports": {}})
        continue
    m = ONE.search(line)
    if m is None:
        sys.exit("FAIL: a report line not in the documented form: " + line)
    if not reports:
        sys.exit("FAIL: an export's line before any line for the whole")
    reports[-1]["exports"][m[1]] = (size(m[2], m[3]), bool(m[4]))

if len(reports) < 2:
    sys.exit("FAIL: %d report(s); the drain should outlast two" % len(reports))
for n, r in enumerate(reports, 1):
    total, slack = r["left"]
    parts = r["exports"].values()
    sum_left = sum(p[0][0] for p in parts)
    if abs(sum_left - total) > slack + sum(p[0][1] for p in parts):
        sys.exit("FAIL: report %d: the exports' lines add up to %d bytes, "
                 "the whole's says %d" % (n, sum_left, total))
    if len(r["exports"]) < r["running"]:
        sys.exit("FAIL: report %d: %d export(s) not finished, %d line(s)"
                 % (n, r["running"], len(r["exports"])))
first = reports[0]
if first["left"][0] != 6 << 20 or not first["unknown"]:
    sys.exit("FAIL: the first report, with the remote paused, should find "
             "all 6 MiB left (dirty or being written) and no progress")
want = {"a": 4 << 20, "b": 2 << 20}
got = {k: v[0][0] for k, v in first["exports"].items()}
if got != want or not all(v[1] for v in first["exports"].values()):
    sys.exit("FAIL: the first report's export lines: %r, expected %r, "
             "each with its time left unknown" % (got, want))
moving = [r for r in reports[1:] if not r["unknown"]]
if not moving:
    sys.exit("FAIL: no report after the remote was let go gives a rate")
print("%d reports, each adding up; the first with no progress, %d with "
      "a rate and a time left" % (len(reports), len(moving)),
      file=sys.stderr)
PY
