#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A client's mistakes get their answer every time but cannot fill the log:
# one connection sending 300 options too large to take (each answered
# NBD_REP_ERR_TOO_BIG, the handshake going on) and then 2,000 READs past
# the end (each answered EINVAL), and more connections with 10 such READs
# each for 2.5 s, leave a line a second at most on each I/O thread, the last
# counting those left out; wbctl status counts every one
# (limits.client_errors).  Handshakes refused for what the client sent
# (500 EXPORT_NAMEs of an unknown export) are logged once in 10 s, the
# next line counting those left out.
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

"$PYTHON" - "$PORT" "$SRCDIR" <<'PY' || fail "see above"
import struct, sys, types
port = int(sys.argv[1])
sys.path.insert(0, sys.argv[2])
import nbdraw
for i in range(500):
    r = nbdraw.Raw(types.SimpleNamespace(tcp=port), tcp=True)
    r.greeting()
    r.send_option(nbdraw.OPT_EXPORT_NAME, b"nosuch%d" % i)
    r.expect_eof("EXPORT_NAME of an unknown export")
    r.close()
PY
refusals=$(grep -c 'handshake: EXPORT_NAME: unknown export' "$LOG" || true)
((refusals >= 1 && refusals <= 2)) ||
	fail "$refusals lines for 500 refused handshakes, expected 1 or 2 (one in 10 s)"
sleep 10
"$PYTHON" - "$PORT" "$SRCDIR" <<'PY' || fail "see above"
import sys, types
sys.path.insert(0, sys.argv[2])
import nbdraw
r = nbdraw.Raw(types.SimpleNamespace(tcp=int(sys.argv[1])), tcp=True)
r.greeting()
r.send_option(nbdraw.OPT_EXPORT_NAME, b"nosuch-last")
r.expect_eof("EXPORT_NAME of an unknown export")
PY
grep -Eq 'unknown export "nosuch-last" \(4[0-9][0-9] more refused handshakes not logged\)' "$LOG" ||
	fail "the next refusal does not count those left out: $(grep 'unknown export' "$LOG" | tail -2)"
assert_alive
stop_wbd
