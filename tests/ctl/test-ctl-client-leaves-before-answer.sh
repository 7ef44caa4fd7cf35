#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Control clients that send many requests and close before reading a single
# answer: the daemon closes each where its socket fails and frees it only
# when its callback has ended (it once freed a client inside the callback
# still using it, a use after free AddressSanitizer reports).  The daemon
# keeps answering, and no sanitizer report reaches its log.
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"

add_export disk0 16M rw
start_wbd

"$SYSPY" - "$CTL" <<'PY' || fail "see above"
import socket, sys
for i in range(20):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sys.argv[1])
    s.sendall(b'{"v":1,"cmd":"version"}\n' * 50)
    s.close()
PY
sleep 1
wbctl version >/dev/null || fail "the daemon stopped answering after clients left early"
stop_wbd
if grep -qiE "AddressSanitizer|heap-use-after-free|runtime error" "$LOG"; then
	fail "a sanitizer report in the daemon's log"
fi
echo PASS
