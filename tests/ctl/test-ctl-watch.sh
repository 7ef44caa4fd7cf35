#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# wbctl status -w redraws in place on a terminal (driven in tmux and read
# with capture-pane): one screen, updated as the daemon's state changes,
# until SIGINT, which ends it with exit status 0.  Not on a terminal, it
# prints successive snapshots separated by a blank line.
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"
need tmux

add_export disk0 16M rw
start_wbd

tm() { tmux -L "wbctl-$$" "$@"; }
# Tall enough for the whole view (about 42 lines with one export, its
# lines within 100 columns) under the header.
tm new-session -d -x 120 -y 60 "'$WBCTL' -s '$CTL' status -w 0.5; echo EXIT=\$?; sleep 60" ||
	skip "tmux cannot start a session"
trap '_rc=$?; set +e; tm kill-server 2>/dev/null; (exit $_rc); _cleanup' EXIT

pane=
wait_pane() {       # wait_pane REGEX: until the pane shows it
	local i
	for ((i = 0; i < 100; i++)); do
		pane=$(tm capture-pane -p)
		grep -Eq -- "$1" <<<"$pane" && return 0
		sleep 0.1
	done
	fail "the pane never showed /$1/: $pane"
}
wait_pane '^  dirty_expire +30\.0 s$'
[[ $(sed -n 1p <<<"$pane") == "Every 0.5s: wbctl status"* ]] ||
	fail "no header on the first line: $pane"
(( $(grep -c '^wbd .*, pid ' <<<"$pane") == 1 )) ||
	fail "not one snapshot on the screen: $pane"

# A change shows up in the running view.
wbctl tune dirty_expire_centisecs=1234 >/dev/null
wait_pane '^  dirty_expire +12\.3 s$'
(( $(grep -c '^wbd .*, pid ' <<<"$pane") == 1 )) ||
	fail "the screen was not redrawn in place: $pane"

tm send-keys C-c
wait_pane 'EXIT='
grep -q 'EXIT=0$' <<<"$pane" || fail "wbctl status -w did not exit 0 on SIGINT: $pane"

# Not a terminal: snapshots one after the other.
"$WBCTL" -s "$CTL" status -w 0.3 >"$T/snap" 2>&1 &
pid=$!
_PIDS+=("$pid")
sleep 1.2
kill -INT "$pid"
wait_exit "$pid" 5 || fail "status -w ignored SIGINT"
[[ $EXIT_STATUS == 0 ]] || fail "status -w exited $EXIT_STATUS on SIGINT"
n=$(grep -c '^wbd .*, pid ' "$T/snap")
((n >= 2)) || fail "expected several snapshots in 1.2 s, got $n"
grep -q $'\033' "$T/snap" && fail "escape sequences written to a file"
(( $(grep -c '^$' "$T/snap") >= 4 * n - 1 )) || fail "snapshots not separated by blank lines"

# An unusable interval is a usage error.
expect_exit 2 wbctl status -w 0
expect_exit 2 wbctl status --watch=soon
assert_alive
