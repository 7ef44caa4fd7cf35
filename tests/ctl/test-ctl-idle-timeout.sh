#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# control.idle_timeout_s: a control client that sends nothing for that
# long is closed (here 1 s), counted (wbctl status: control.idle_closed)
# and logged; so is one that sends a byte of a request every 0.2 s and
# never ends it (the time counts from the last whole request, not the last
# byte); with 0 (off) one stays connected.
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"

add_export disk0 16M rw
CTL_EXTRA='idle_timeout_s = 1;'
start_wbd
"$SYSPY" - "$CTL" <<'PY' || fail "see above"
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(10)
start = time.monotonic()
if s.recv(1) != b"":
    sys.exit("FAIL: the idle client got data")
took = time.monotonic() - start
if not 0.9 <= took <= 5:
    sys.exit("FAIL: the idle client was closed after %.1f s, not 1-5 s" % took)
print("an idle control client was closed after %.1f s" % took)

d = socket.socket(socket.AF_UNIX)
d.connect(sys.argv[1])
d.settimeout(0.2)
start = time.monotonic()
while time.monotonic() - start < 10:
    try:
        d.send(b" ")
    except OSError:
        break
    try:
        if d.recv(1) == b"":
            break
    except socket.timeout:
        pass
    except OSError:
        # Closed with a dripped byte unread: a Unix socket's peer then
        # reads ECONNRESET, not the end of the stream.
        break
took = time.monotonic() - start
if not 0.9 <= took <= 5:
    sys.exit("FAIL: a client dripping a request was closed after %.1f s, "
             "not 1-5 s" % took)
print("a client dripping a request was closed after %.1f s" % took)
PY
expect_exit 0 wbctl status --json
read -r timeout closed <<<"$("$SYSPY" -c 'import json, sys
c = json.load(sys.stdin)["control"]
print(c["idle_timeout_s"], c["idle_closed"])' <<<"$OUT")"
[[ "$timeout $closed" == "1 2" ]] || fail "status control: idle_timeout_s $timeout, idle_closed $closed"
grep -q 'control: closing a client of uid [0-9]* idle for 1 s (control.idle_timeout_s)' "$LOG" ||
	fail "the idle client's closing was not logged"
stop_wbd

CTL_EXTRA='idle_timeout_s = 0;'
write_config
start_wbd
"$SYSPY" - "$CTL" <<'PY' || fail "see above"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(3.5)
try:
    s.recv(1)
    sys.exit("FAIL: closed with control.idle_timeout_s = 0")
except socket.timeout:
    pass
s.sendall(b'{"v":1,"cmd":"version"}\n')
if b'"ok": true' not in s.recv(4096).replace(b'"ok":true', b'"ok": true'):
    sys.exit("FAIL: the client kept open got no answer")
print("with idle_timeout_s = 0 a silent client stays connected")
PY
assert_alive
stop_wbd
