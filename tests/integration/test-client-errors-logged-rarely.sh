#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A client's mistakes get their answer every time but cannot fill the log:
# one connection sending 300 options too large to take (each answered
# NBD_REP_ERR_TOO_BIG, the handshake going on) and then 2,000 READs past
# the end (each answered EINVAL), and more connections with 10 such READs
# each for 2.5 s, leave a line a second at most on each I/O thread, the last
# counting those left out; wbctl status counts every one
# (limits.client_errors).
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export disk0 16M rw
start_wbd
client_errors() {
	"$WBCTL" -s "${SOCK%/*}/control.sock" status --json |
		"$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["limits"]["client_errors"])'
}
[[ $(client_errors) == 0 ]] || fail "limits.client_errors is not 0 at start"

start=$(date +%s)
"$PYTHON" - "$PORT" "$SRCDIR" >"$T/made" <<'PY' || fail "see above"
import sys, time, types
port = int(sys.argv[1])
sys.path.insert(0, sys.argv[2])
import nbdraw

def connect():
    return nbdraw.Raw(types.SimpleNamespace(tcp=port), tcp=True)

def past_the_end(r, n):
    for i in range(n):
        r.request(nbdraw.CMD_READ, 16 << 20, 4096, handle=i + 1)
        r.expect_error("READ past the end", nbdraw.EINVAL, handle=i + 1)

r = connect()
r.greeting()
for i in range(300):
    r.send_option(nbdraw.OPT_INFO, b"\0" * (70 << 10))
    rtype = r.option_replies(nbdraw.OPT_INFO)[-1][0]
    if rtype != nbdraw.REP_ERR_TOO_BIG:
        sys.exit("FAIL: option %d of 70 KiB: %s, not NBD_REP_ERR_TOO_BIG"
                 % (i, nbdraw.repname(rtype)))
rtype, _ = r.go("disk0")
if rtype != nbdraw.REP_ACK:
    sys.exit("FAIL: GO after the oversized options: %s" % nbdraw.repname(rtype))
past_the_end(r, 2000)
r.close()
# More connections, 10 each, for 2.5 s at least (a second line is due).
conns = 0
end = time.monotonic() + 2.5
while conns < 40 or time.monotonic() < end:
    r = connect()
    r.open("disk0")
    past_the_end(r, 10)
    r.close()
    conns += 1
print("300 oversized options and %d READs past the end, each answered"
      % (2000 + 10 * conns), file=sys.stderr)
print(300 + 2000 + 10 * conns)
PY
secs=$(($(date +%s) - start + 1))
made=$(cat "$T/made")
n=$(client_errors)
((n == made)) || fail "limits.client_errors is $n, expected $made"
lines=$(grep -Ec 'of 71680 bytes is too large; skipping it|: rejected ' "$LOG" || true)
max=$(((secs + 1) * $(getconf _NPROCESSORS_ONLN)))
((lines >= 1)) || fail "no client error logged"
((lines <= max)) ||
	fail "$lines log lines for $made client errors in $secs s (at most $max: one a second on each I/O thread)"
grep -Eq '\([1-9][0-9]* other client errors not logged\)' "$LOG" ||
	fail "no line counts the client errors it left out"
log "$made client errors in $secs s: $lines log lines (at most $max)"
assert_alive
stop_wbd
