#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# When stderr is not a terminal (a file, a pipe), "wbctl flush" reports
# progress as "flush: X of Y remaining" lines, and the last of them, once
# the daemon has said the flush is done, shows 0 B remaining -- as the
# bar on a terminal ends at 100%.  The daemon's own reports come every
# half second, so a quick flush may get only its first one, with
# everything still to do: without the last line the output would stop
# there.  (test-ctl-flush-progress does the same on a slow backing store.)
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"
need_python_nbd

add_export disk0 32M rw
write_cache_config 64M 'dirty_background_bytes = "32M"; dirty_bytes = "48M"; dirty_writeback_centisecs = 0;'
start_wbd

# write_dirty SEED: 8M at offset 0, no FLUSH.
write_dirty() {
	"$PYTHON" - "$(uri_unix disk0)" "$1" <<'PY' || fail "could not write through libnbd"
import nbd, random, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(random.Random(int(sys.argv[2])).randbytes(8 << 20), 0)
h.shutdown()        # NBD_CMD_DISC: no FLUSH
PY
}

# check_progress TEXT WHAT: progress lines only, of one total, remaining
# never going up, the last one, and only it, with 0 B.
check_progress() {
	"$SYSPY" - "$1" "$2" <<'PY' || fail "$2: bad progress lines: $1"
import re, sys
text, what = sys.argv[1], sys.argv[2]
units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
lines = text.splitlines()
if not lines:
    sys.exit("FAIL: %s: no progress line" % what)
prev = None
for line in lines:
    m = re.fullmatch(r"flush: ([\d.]+) (B|KiB|MiB|GiB) of ([\d.]+) (B|KiB|MiB|GiB) remaining", line)
    if not m:
        sys.exit("FAIL: %s: not a progress line: %r" % (what, line))
    left, total = float(m[1]) * units[m[2]], float(m[3]) * units[m[4]]
    if left > total:
        sys.exit("FAIL: %s: %r: more remaining than in all" % (what, line))
    if prev is not None and total != prev_total:
        sys.exit("FAIL: %s: %r: the total changed" % (what, line))
    prev_total = total
    if prev is not None and left > prev:
        sys.exit("FAIL: %s: %r: remaining went up" % (what, line))
    prev = left
# The first report's total is what was dirty once the flush had begun:
# up to the 8 MiB written, less what writeback had already taken.
if not lines[-1].startswith("flush: 0 B of ") or total > 8 << 20:
    sys.exit("FAIL: %s: the last line is %r, not 0 B remaining" % (what, lines[-1]))
if sum(l.startswith("flush: 0 B of ") for l in lines) != 1:
    sys.exit("FAIL: %s: more than one line says 0 B remaining" % what)
print("%s: %d line(s)" % (what, len(lines)))
PY
}

# stderr into a file.
write_dirty 1
expect_exit 0 wbctl flush disk0
[[ $OUT == "flushed disk0" ]] || fail "flush printed: $OUT"
check_progress "$ERR" "stderr to a file"

# stderr into a pipe, stdout too.
write_dirty 2
out=$( { "$WBCTL" -s "$CTL" flush disk0 2>&1 >&3 3>&- | cat >"$T/progress"; } 3>&1) ||
	fail "wbctl flush into a pipe failed"
[[ $out == "flushed disk0" ]] || fail "flush into a pipe printed: $out"
check_progress "$(cat "$T/progress")" "stderr to a pipe"

# Nothing dirty: one line, 0 B of 0 B, and no other.
expect_exit 0 wbctl flush disk0
[[ $ERR == "flush: 0 B of 0 B remaining" ]] || fail "a flush of nothing reported: $ERR"

# A failed flush does not claim that nothing remains: an unknown export.
expect_exit 1 wbctl flush nosuchexport
grep -q 'remaining' <<<"$ERR" && fail "a refused flush reported progress: $ERR"
assert_alive
