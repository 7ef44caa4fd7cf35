#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# wbctl flush waits until the data is on the backing store, showing the
# bytes remaining: plain "flush: X of Y remaining" lines when stderr is not
# a terminal, a progress bar redrawn in place when it is (driven in tmux);
# both end at 0 B remaining.
# The backing store is slowed down (nbdkit's delay filter behind nbdfuse)
# so that the flush takes a few seconds.  Exit status 0, and the backing
# file holds the data afterwards.
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"
need_python_nbd
need tmux
declare -F start_slow_file >/dev/null || skip "lib.sh has no start_slow_file"

start_slow_file "$T/slow" 64M 150ms
add_export_mode disk0 16M writeback "$SLOW_FILE"
write_cache_config 64M 'dirty_background_bytes = "32M"; dirty_bytes = "48M"; dirty_writeback_centisecs = 0;'
start_wbd

# write_dirty SEED: 8M of data at offset 0, no FLUSH; saves it in $T/data.
write_dirty() {
	"$PYTHON" - "$(uri_unix disk0)" "$T/data" "$1" <<'PY'
import nbd, random, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = random.Random(int(sys.argv[3])).randbytes(8 << 20)
h.pwrite(data, 0)
open(sys.argv[2], "wb").write(data)
h.shutdown()        # NBD_CMD_DISC: no FLUSH
PY
}
backing_matches() {
	cmp -s -n $((8 << 20)) "$T/data" "$SLOW_FILE"
}

# Plain lines when stderr is not a terminal.
write_dirty 1
backing_matches && fail "the data reached the backing store before the flush"
start=$SECONDS
expect_exit 0 wbctl flush disk0
[[ $OUT == "flushed disk0" ]] || fail "flush printed: $OUT"
backing_matches || fail "after wbctl flush the backing store lacks the data"
log "flush took $((SECONDS - start)) s; progress: $(tr '\n' '|' <<<"$ERR")"
[[ -n $ERR ]] || fail "a flush of $((SECONDS - start)) s printed no progress"
"$SYSPY" - "$ERR" <<'PY' || fail "bad progress lines: $ERR"
import re, sys
units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
prev = None
for line in sys.argv[1].splitlines():
    m = re.fullmatch(r"flush: ([\d.]+) (B|KiB|MiB|GiB) of ([\d.]+) (B|KiB|MiB|GiB) remaining", line)
    if not m:
        sys.exit("not a progress line: %r" % line)
    left = float(m[1]) * units[m[2]]
    total = float(m[3]) * units[m[4]]
    if left > total or total > 8.1 * (1 << 20):
        sys.exit("%r: more remaining than written" % line)
    if prev is not None and left > prev:
        sys.exit("%r: remaining went up" % line)
    prev = left
if prev != 0:
    sys.exit("the last line says %r remain, not 0 B" % line)
PY

# A progress bar on a terminal.
write_dirty 2
tmux -L "wbctl-$$" new-session -d -x 120 -y 40 \
	"'$WBCTL' -s '$CTL' flush; echo EXIT=\$?; sleep 60" ||
	skip "tmux cannot start a session"
trap '_rc=$?; set +e; tmux -L "wbctl-$$" kill-server 2>/dev/null; (exit $_rc); _stop_slow_file_then_cleanup' EXIT
seen_bar=
for ((i = 0; i < 300; i++)); do
	pane=$(tmux -L "wbctl-$$" capture-pane -p)
	grep -Eq '^flush \[[#.]{30}\] +[0-9]+%  .* remaining' <<<"$pane" && seen_bar=1
	grep -q '^EXIT=' <<<"$pane" && break
	sleep 0.1
done
grep -q '^EXIT=0$' <<<"$pane" || fail "wbctl flush on a terminal: $pane"
grep -q '^flushed disk0, *$\|^flushed disk0$' <<<"$pane" || fail "no result line: $pane"
[[ -n $seen_bar ]] || fail "no progress bar on the terminal: $pane"
# Redrawn in place: one bar line, not one per report; left full.
(( $(grep -c '^flush \[' <<<"$pane") == 1 )) || fail "the bar was not redrawn in place: $pane"
grep -Eq '^flush \[#{30}\] 100%  0 B of [0-9.]+ MiB remaining' <<<"$pane" ||
	fail "the bar does not end at 100%, 0 B remaining: $pane"
backing_matches || fail "after wbctl flush on a terminal the backing store lacks the data"
assert_alive
