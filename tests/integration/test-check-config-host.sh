#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# wbd -n checks what the file names on this host, not only the file: a
# backing file in a directory that does not exist, a read-only export
# whose file is missing, a TCP port or a Unix socket another server
# holds, a control socket a live server owns, an unknown control.group --
# each refused with the file (and line) and what is wrong, exit status 1;
# several problems are all reported, each at the line of its setting.
# A write log that cannot be made or opened is refused at its path; each
# log's state file is said (none, or what it says), a damaged one or a
# directory for it wbd's user cannot write in refused.
# An export larger than its file system holds in one file (ext4: 16 TiB)
# is refused at its size line.  A running wbd's own file (its control
# socket live) is checked as before a reload: the sockets in use are
# taken to be its own, without a word, and the rest is checked.  Run by
# systemd (INVOCATION_ID set, as for ExecStartPre=), a live control
# socket is an error and the listeners are left to wbd.socket.  A good
# configuration is still "configuration OK".
source "${SRCDIR:-$(dirname "$0")}/lib.sh"

add_export disk0 16M rw
write_config
out=$("$WBD" -n -c "$CONF" 2>&1) || fail "a good configuration: $out"
[[ $out == "configuration OK" ]] || fail "a good configuration: $out"

# check_fails CONF REGEX...: wbd -n exits 1 and says each REGEX.
check_fails() {
	local conf=$1 rc=0 re
	shift
	out=$("$WBD" -n -c "$conf" 2>&1) || rc=$?
	[[ $rc == 1 ]] || fail "wbd -n exited $rc, expected 1: $out"
	for re in "$@"; do
		grep -Eq -- "$re" <<<"$out" || fail "expected /$re/ in: $out"
	done
	grep -q 'configuration OK' <<<"$out" && fail "said OK with problems: $out"
	log "refused: $out"
}

# Exports: a missing directory; a read-only export of a missing file.
_EXPORTS=()
add_export disk0 16M rw "" "$T/no/such/dir/disk0.img"
_EXPORTS+=("  { name = \"ro\"; backing = \"$T/missing.img\"; readonly = true; }")
write_config "$T/exports.conf"
check_fails "$T/exports.conf" \
	"^wbd: $T/exports.conf:[0-9]+: exports\[0\]\.backing: directory $T/no/such/dir does not exist\$" \
	"exports\[1\]\.backing: $T/missing.img does not exist"

# Write logs: in a directory that does not exist; size 0 (a device used
# whole) on a path with nothing there; a directory where the log should be.
mkdir -p "$T/adir"
_EXPORTS=()
_EXPORTS+=("  { name = \"j0\"; backing = \"$T/j0.img\"; size = \"16M\"; journal = { path = \"$T/no/such/j0.wal\"; }; }")
_EXPORTS+=("  { name = \"j1\"; backing = \"$T/j1.img\"; size = \"16M\"; journal = { path = \"$T/j1.wal\"; size = 0; }; }")
_EXPORTS+=("  { name = \"j2\"; backing = \"$T/j2.img\"; size = \"16M\"; journal = { path = \"$T/adir\"; }; }")
write_config "$T/journals.conf"
check_fails "$T/journals.conf" \
	"^wbd: $T/journals.conf:[0-9]+: exports\[0\]\.journal\.path: directory $T/no/such does not exist\$" \
	"exports\[1\]\.journal\.path: $T/j1.wal does not exist \(size 0 uses an existing file or block device whole\)" \
	"exports\[2\]\.journal\.path: $T/adir is neither a file nor a block device"

# Write logs' state files (docs/journal.md, "A log that fails"), each
# said on a line of its own: none; one naming another log (made anew
# since: a start removes it); a damaged one, which the start would refuse,
# at the log's line; and a state_dir wbd's user cannot write in (as root,
# user = "nobody": the directory's mode bits say), at its line.
mkdir -p "$T/st" "$T/st-ro"
chmod 0555 "$T/st-ro"
_EXPORTS=()
_EXPORTS+=("  { name = \"s0\"; backing = \"$T/s0.img\"; size = \"16M\"; journal = { path = \"$T/s0.wal\"; }; }")
_EXPORTS+=("  { name = \"s1\"; backing = \"$T/s1.img\"; size = \"16M\"; journal = { path = \"$T/s1.wal\"; state_dir = \"$T/st\"; }; }")
write_config "$T/states.conf"
write_log_state "$T/st/${T//\//%2F}%2Fs1.wal.state" 7
out=$("$WBD" -n -c "$T/states.conf" 2>&1) || fail "state files: $out"
grep -qxF "exports[0] \"s0\": write log $T/s0.wal: no state file ($T/s0.wal.state)" <<<"$out" ||
	fail "wbd -n does not say that s0's log has no state file: $out"
grep -qxF "exports[1] \"s1\": write log $T/s1.wal: state file $T/st/${T//\//%2F}%2Fs1.wal.state: uuid $(printf '5eed%.0s' 1 2 3 4 5 6 7 8) (not the log's), stale_below 7: the log was made anew since; a start removes it" <<<"$out" ||
	fail "wbd -n does not say what s1's state file says: $out"
grep -q 'configuration OK' <<<"$out" || fail "state files: $out"
echo "wbd write log state 1" >"$T/s0.wal.state"
s0_line=$(grep -n 'name = "s0"' "$T/states.conf" | cut -d: -f1)
check_fails "$T/states.conf" \
	"^wbd: $T/states.conf:$s0_line: exports\[0\]\.journal: state file $T/s0.wal.state is damaged: a start refuses to replay $T/s0.wal"
rm -f "$T/s0.wal.state"
if (($(id -u) == 0)); then
	sed -i "s|^listen = |user = \"nobody\";\nlisten = |" "$T/states.conf"
fi
sed -i "s|state_dir = \"$T/st\"|state_dir = \"$T/st-ro\"|" "$T/states.conf"
ro_line=$(grep -n 'name = "s1"' "$T/states.conf" | cut -d: -f1)
check_fails "$T/states.conf" \
	"^wbd: $T/states.conf:$ro_line: exports\[1\]\.journal: $T/st-ro, the directory of its state file .* is not writable by (nobody|the user running wbd -n): Permission denied\$"

# A size the backing's file system cannot hold in one file, where this
# one cannot (ext4, xfs with small blocks; tmpfs holds 8E).
if truncate -s 1E "$T/probe.img" 2>/dev/null; then
	log "this file system holds a file of 1E: its limit not checked"
else
	printf 'listen = { unix = [ "%s" ]; };\ncontrol = { socket = "none"; };\nexports = (\n  { name = "x"; backing = "%s";\n    size = "1E"; }\n);\n' \
		"$T/big.sock" "$T/big.img" >"$T/big.conf"
	check_fails "$T/big.conf" \
		"^wbd: $T/big.conf:5: exports\[0\]\.size: 1E: the file system of $T holds no file this large \(File too large\)\$"
	[[ ! -e $T/big.img ]] || fail "wbd -n created $T/big.img"
fi
rm -f "$T/probe.img"

# Listeners held by a running wbd (another control socket: not a check
# before its reload).  (A control.group that does not exist is refused
# when the file is read, with its line: test-check-config.)
_EXPORTS=()
add_export disk0 16M rw
start_wbd
sed -e "s|\"$T/disk0.img\"|\"$T/other.img\"|" \
	-e "s|^control = .*|control = { socket = \"$T/other-control.sock\"; };|" \
	"$CONF" >"$T/busy.conf"
check_fails "$T/busy.conf" \
	"^wbd: $T/busy.conf:2: listen\.tcp\[0\]: 127\.0\.0\.1:$PORT: in use by another server\$" \
	"^wbd: $T/busy.conf:2: listen\.unix\[0\]: $SOCK is in use by a running server\$"

# The running wbd's own file, checked before a reload: the sockets in use
# are its own, which is normal, and nothing is said about them.
out=$("$WBD" -n -c "$CONF" 2>&1) || fail "its own file, before a reload: $out"
[[ $out == "configuration OK" ]] || fail "its own file, before a reload: $out"
# What is not in use is still checked: a listener added in a directory
# that does not exist is the one problem (the sockets in use are not).
sed -e "s|unix = \[ \"$SOCK\" \]|unix = [ \"$SOCK\",\n  \"$T/no/such/dir/x.sock\" ]|" \
	"$CONF" >"$T/added.conf"
check_fails "$T/added.conf" \
	"^wbd: $T/added.conf:3: listen\.unix\[1\]: directory $T/no/such does not exist\$"
grep -Eq 'listen\.(tcp|unix)\[0\]|note' <<<"$out" && fail "the running wbd's sockets reported: $out"

# As systemd's ExecStartPre= (a start): a live control socket is an
# error, the listeners are left to wbd.socket.
rc=0
out=$(INVOCATION_ID=test "$WBD" -n -c "$CONF" 2>&1) || rc=$?
[[ $rc == 1 ]] || fail "a start on a live control socket passed: $out"
grep -q "^wbd: $CONF:4: control\.socket: $T/control.sock is in use by a running server\$" <<<"$out" ||
	fail "control socket not reported under systemd: $out"
grep -q 'listen\.' <<<"$out" && fail "listeners checked under systemd: $out"
log "backing directories, listeners, the control socket and its group are checked"
