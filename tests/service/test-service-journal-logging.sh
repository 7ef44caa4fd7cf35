#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Logging as the journal wants it: when stderr is the journal's stream
# ($JOURNAL_STREAM names its device and inode), each line starts with its
# syslog priority, "<N>", and carries no time stamp or name of wbd's own
# (the journal adds both).  A start-up failure is one "<3>error:" line
# that names the cause; connections and disconnections are logged at info
# with the peer, the export and how long the client stayed.  Without a
# matching JOURNAL_STREAM the lines are the terminal's, time-stamped.
source "${SRCDIR:?SRCDIR must name tests/service}/lib-service.sh"
need nbdinfo

JLOG=$T/journal.log
: >"$JLOG"
stream=$(stat -c '%d:%i' "$JLOG")

# A backing file in a directory that does not exist: one error line.
add_export disk0 16M rw "" "$T/no/such/dir/disk0.img"
write_config
# The backing setting on a line of its own, below the export's.
sed -i 's|; backing = |;\n    backing = |' "$CONF"
rc=0
JOURNAL_STREAM=$stream "$WBD" -f -c "$CONF" 2>>"$JLOG" || rc=$?
[[ $rc == 1 ]] || fail "wbd exited with status $rc on a missing backing directory"
[[ $(grep -c '^<[0-4]>' "$JLOG") == 1 ]] ||
	fail "expected one error or warning for the failed start-up, got: $(cat "$JLOG")"
# At the backing setting's line, as wbd -n names it (not the export's).
bline=$(grep -n "backing = \"$T/no/such/dir/disk0.img\"" "$CONF" | cut -d: -f1)
[[ -n $bline ]] || fail "no backing line in $CONF"
grep -q "^<3>error: $CONF:$bline: export \"disk0\": .*directory $T/no/such/dir does not exist\$" "$JLOG" ||
	fail "not one <3>error: line naming the missing directory at $CONF:$bline: $(cat "$JLOG")"

# A good start, a client, a shutdown.
_EXPORTS=()
add_export disk0 16M rw
write_config
: >"$JLOG"
_LOGS+=("$JLOG")
JOURNAL_STREAM=$stream "$WBD" -f -c "$CONF" 2>>"$JLOG" &
WBD_PID=$!
track_wbd "$WBD_PID"
wait_ready "$WBD_PID" "$SOCK" "$PORT" "$JLOG"
nbdinfo "$(uri_unix)" >/dev/null || fail "nbdinfo failed"
stop_wbd
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with status $EXIT_STATUS"

bad=$(grep -v '^<[0-7]>' "$JLOG" || true)
[[ -z $bad ]] || fail "lines without a <N> priority prefix: $bad"
grep -Eq '^<[0-7]>[0-9]{2}:[0-9]{2}:' "$JLOG" && fail "lines carry a time stamp"
grep -q '^<[0-7]>wbd: ' "$JLOG" && fail "lines carry wbd's name"
grep -q '^<6>wbd 0\.[0-9.]* ready: ' "$JLOG" || fail "no <6> ready line"
grep -q '^<6>unix#[0-9]*: connected to export "disk0"' "$JLOG" ||
	fail "the connection is not logged at info"
grep -Eq '^<6>unix#[0-9]*: connection to export "disk0" closed after [0-9]+\.[0-9] s$' "$JLOG" ||
	fail "the disconnection is not logged at info with its duration"

# The terminal's format when JOURNAL_STREAM names another file.
: >"$T/term.log"
JOURNAL_STREAM=$stream "$WBD" -n -c "$T/none.conf" 2>>"$T/term.log" || true
grep -q '^wbd: ' "$T/term.log" || fail "wbd -n with another JOURNAL_STREAM: $(cat "$T/term.log")"
log "priorities for the journal, one error line, connections with duration"
