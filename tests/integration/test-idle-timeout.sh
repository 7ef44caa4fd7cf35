#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# limits.local_idle_timeout_s (a client of this host, as here: a Unix
# socket) and idle_timeout_s (a remote one): a client that sends nothing
# for that long (with nothing in flight) is closed and logged; one that
# keeps sending is not.  By default 6 h for a remote client, never for a
# local one (the kernel client keeps idle connections for hours).  An
# export's own idle_timeout_s (0 here: the kernel client's export) wins:
# its idle client stays, and wbctl status shows it; a reload changes it.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export disk0 16M rw
add_export kernel 16M rw
_EXPORTS[-1]=${_EXPORTS[-1]% \}}" idle_timeout_s = 0; }"
write_config
echo 'limits = { idle_timeout_s = 2; local_idle_timeout_s = 2; };' >>"$CONF"
start_wbd

"$PYTHON" - "$(uri_unix disk0)" "$(uri_unix kernel)" <<'PY' || fail "see above"
import nbd, os, sys, time
uri = sys.argv[1]
idle, busy, kernel = nbd.NBD(), nbd.NBD(), nbd.NBD()
idle.connect_uri(uri)
busy.connect_uri(uri)
kernel.connect_uri(sys.argv[2])
buf = os.urandom(4096)
idle.pwrite(buf, 0)
end = time.monotonic() + 4
while time.monotonic() < end:          # busy keeps asking, idle does not
    if busy.pread(4096, 0) != buf:
        sys.exit("FAIL: read back wrong")
    time.sleep(0.3)
try:
    idle.pread(4096, 0)
    sys.exit("FAIL: a client idle for 4 s (idle_timeout_s = 2) was not closed")
except nbd.Error:
    pass
busy.pread(4096, 0)                    # still served
busy.shutdown()
kernel.pread(4096, 0)                  # its export: no idle timeout
kernel.shutdown()
PY
"$WBCTL" -s "$T/control.sock" status --json | "$PYTHON" -c 'import json, sys
ex = {e["name"]: e["idle_timeout_s"] for e in json.load(sys.stdin)["exports"]}
if ex != {"disk0": None, "kernel": 0}:
    sys.exit("FAIL: status shows the exports idle timeouts as %r" % ex)' ||
	fail "see above"
# A reload changes an export's idle timeout, for new connections.
sed -i 's/idle_timeout_s = 0; }/idle_timeout_s = 1; }/' "$CONF"
kill -HUP "$WBD_PID"
wait_log 10 'export "kernel": idle_timeout_s changed (for new connections)' ||
	fail "the reload did not change the export's idle_timeout_s"
"$WBCTL" -s "$T/control.sock" status --json | "$PYTHON" -c 'import json, sys
ex = {e["name"]: e["idle_timeout_s"] for e in json.load(sys.stdin)["exports"]}
if ex != {"disk0": None, "kernel": 1}:
    sys.exit("FAIL: after the reload, status shows %r" % ex)' ||
	fail "see above"
grep -q 'no request for 2 s (limits.local_idle_timeout_s); closing' "$LOG" ||
	fail "the idle close was not logged"
n=$(grep -c 'limits.local_idle_timeout_s' "$LOG")
((n == 1)) || fail "$n idle closes logged, expected 1"
assert_alive
stop_wbd
check_logs_clean || exit 1
