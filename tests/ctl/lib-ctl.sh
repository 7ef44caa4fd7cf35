# SPDX-License-Identifier: GPL-2.0-or-later
# lib-ctl.sh - helpers for wbctl's integration tests.  Sourced, not run.
#
# Builds on ../integration/lib.sh (read it first): $T, $CONF, $LOG, $SOCK,
# $PORT, add_export, start_wbd, stop_wbd, fail, skip...  Adds a control
# socket to every config that write_config writes:
#   control = { socket = "$CTL"; $CTL_EXTRA };
# (set CTL_EXTRA before start_wbd for mode, group, admin_group), and:
#   wbctl ARGS...          run $WBCTL -s $CTL ARGS...
#   expect_exit N CMD...   run CMD, capturing stdout in $OUT and stderr in
#                          $ERR; fail unless it exits with status N
#   check_schema CMD FILE  check a --json answer against the protocol's
#                          schema (docs/control-protocol.md)
#
# Environment: WBD, WBCTL (set by meson), SRCDIR (this directory).

: "${SRCDIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
: "${WBCTL:?WBCTL must name the wbctl binary (meson sets it)}"
[[ $WBCTL == */* ]] && WBCTL=$(cd "$(dirname "$WBCTL")" && pwd)/$(basename "$WBCTL")
source "$SRCDIR/../integration/lib.sh"

# The system interpreter: json is all these tests need from it, and it is
# the one with libnbd's bindings (lib.sh's $PYTHON).
SYSPY=/usr/bin/python3
[[ -x $SYSPY ]] || SYSPY=python3

CTL=$T/control.sock
CTL_EXTRA=${CTL_EXTRA:-}

# Every config written gets this control group, in place of lib.sh's.
eval "$(declare -f write_config | sed '1s/write_config/_it_write_config/')"
write_config() {
	local file=${1:-$CONF}
	_it_write_config "$@"
	sed -i '/^control = /d' "$file"
	echo "control = { socket = \"$CTL\"; $CTL_EXTRA };" >>"$file"
}

wbctl() {
	"$WBCTL" -s "$CTL" "$@"
}

OUT=
ERR=
expect_exit() {
	local want=$1 rc=0
	shift
	"$@" >"$T/out" 2>"$T/err" || rc=$?
	OUT=$(cat "$T/out")
	ERR=$(cat "$T/err")
	if [[ $rc != "$want" ]]; then
		printf '%s\n--- stdout ---\n%s\n--- stderr ---\n%s\n' \
			"$*" "$OUT" "$ERR" >&2
		fail "\"$*\" exited with status $rc, expected $want"
	fi
}

# assert_match REGEX TEXT WHAT: TEXT matches the extended REGEX.
assert_match() {
	grep -Eq -- "$1" <<<"$2" ||
		fail "$3: expected to match /$1/, got: $2"
}

# assert_one_line TEXT WHAT: an error is one line starting "wbctl: ".
assert_one_line() {
	[[ $(wc -l <<<"$1") == 1 && $1 == "wbctl: "* ]] ||
		fail "$2: expected one line \"wbctl: ...\" on stderr, got: $1"
}

check_schema() {
	"$SYSPY" "$SRCDIR/ctl-schema.py" "$1" "$2" ||
		fail "wbctl --json $1: the answer does not match the schema"
}

# tunable KEY: the value "wbctl tune KEY" prints (without the unit).
tunable() {
	wbctl tune "$1" | sed -n "s/^$1 = \([^ ]*\).*/\1/p"
}
