#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# One local user cannot lock the TCP listener.  Every local user connects
# from 127.0.0.1: wbd counts a TCP client of this host by its uid (as a
# Unix socket client), not by the address they share.  A user (nobody)
# holding 64 idle connections (limits.max_connections_per_client) and
# trying 8 more from 127.0.0.2... is refused those 8, while another user's
# new connection from 127.0.0.1 is served with verified I/O; the idle ones
# are closed after limits.local_idle_timeout_s (4 s here), counted in
# wbctl status and logged once, not 64 times.  Then the reserve: with
# max_connections = 8 and reserved_connections = 2, the idle user gets 6,
# and a new client still gets in.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
need setpriv
[[ $(id -u) == 0 ]] || skip "needs root to run a client as another user"
[[ -x /usr/bin/python3 ]] || skip "/usr/bin/python3 not found"

# HOSTILE N EXTRA WAIT: hostile-idle.py as nobody, in the background;
# its lines go to $T/hostile.out.
hostile() {
	: >"$T/hostile.out"
	setpriv --reuid=65534 --regid=65534 --clear-groups \
		/usr/bin/python3 - "$PORT" disk0 "$@" \
		<"$SRCDIR/hostile-idle.py" >"$T/hostile.out" 2>&1 &
	HOSTILE_PID=$!
	_PIDS+=("$HOSTILE_PID")
	local i
	for ((i = 0; i < 100; i++)); do
		grep -q '^held' "$T/hostile.out" && return 0
		sleep 0.1
	done
	cat "$T/hostile.out" >&2
	fail "the idle user did not connect within 10 s"
}

# served: a new client of root from 127.0.0.1 does verified I/O.
served() {
	"$PYTHON" - "$(uri_tcp disk0)" <<'PY' || fail "see above"
import nbd, os, sys, time
t = time.monotonic()
h = nbd.NBD()
try:
    h.connect_uri(sys.argv[1])
except nbd.Error as e:
    sys.exit("FAIL: a new client was refused while another user holds "
             "idle connections: %s" % e)
buf = os.urandom(65536)
h.pwrite(buf, 0)
h.flush()
if h.pread(65536, 0) != buf:
    sys.exit("FAIL: data read back wrong")
h.shutdown()
print("new client served in %.2f s" % (time.monotonic() - t))
PY
}

add_export disk0 16M rw
write_config
echo 'limits = { local_idle_timeout_s = 4; };' >>"$CONF"
start_wbd

hostile 64 8 15
read -r _ held _ extra <"$T/hostile.out"
((held == 64)) || fail "the idle user holds $held connections, expected 64"
((extra == 0)) ||
	fail "the idle user got $extra more from other loopback addresses"
served
status=$("$WBCTL" -s "$T/control.sock" status --json) ||
	fail "wbctl status failed"
"$PYTHON" - "$status" <<'PY' || fail "see above"
import json, sys
lim = json.loads(sys.argv[1])["limits"]
want = {"max_connections_per_client": 64, "reserved_connections": 64,
        "idle_timeout_s": 21600, "local_idle_timeout_s": 4,
        "handshake_timeout_s": 30}
for k, v in want.items():
    if lim.get(k) != v:
        sys.exit("FAIL: status: limits.%s is %r, expected %r"
                 % (k, lim.get(k), v))
if lim["clients"] != 1 or lim["connections"] != 64:
    sys.exit("FAIL: status: %d connections of %d clients, expected 64 of 1"
             % (lim["connections"], lim["clients"]))
PY
text=$("$WBCTL" -s "$T/control.sock" status) || fail "wbctl status failed"
grep -q 'idle timeout  *6h 0m remote (idle_timeout_s), 4.0 s local' <<<"$text" ||
	{ echo "$text" >&2; fail "wbctl status does not show the idle timeouts"; }
wait "$HOSTILE_PID" || fail "the idle user's script failed"
cat "$T/hostile.out" >&2
read -r _ closed _ secs _ < <(sed -n 2p "$T/hostile.out")
((closed == 64)) || fail "$closed of 64 idle connections closed"
awk -v s="$secs" 'BEGIN { exit !(s >= 2 && s <= 8) }' ||
	fail "the idle connections were closed after $secs s (timeout 4 s)"
status=$("$WBCTL" -s "$T/control.sock" status --json)
"$PYTHON" - "$status" <<'PY' || fail "see above"
import json, sys
lim = json.loads(sys.argv[1])["limits"]
if lim["idle_closed"] != 64 or lim["connections"] != 0:
    sys.exit("FAIL: status: %d idle closed, %d connections left"
             % (lim["idle_closed"], lim["connections"]))
PY
metrics=$("$WBCTL" -s "$T/control.sock" metrics) || fail "wbctl metrics failed"
grep -qx 'wbd_connections_idle_closed_total 64' <<<"$metrics" ||
	fail "wbctl metrics: $(grep idle_closed <<<"$metrics")"
grep -qx 'wbd_connections_reserved 64' <<<"$metrics" ||
	fail "wbctl metrics does not show the reserve"
n=$(grep -c 'limits.local_idle_timeout_s); closing' "$LOG")
((n >= 1 && n <= 3)) || fail "$n idle closes logged for 64 (rate limit)"
n=$(grep -c 'refused: ' "$LOG")
((n == 1)) || fail "$n refusal lines logged for 8 refusals, expected 1"
grep -q 'refused: client uid 65534 already has 64 connections' "$LOG" ||
	fail "the refusal does not name the user"
stop_wbd
check_logs_clean || exit 1

log "the reserve for new clients"
write_config
echo 'limits = { max_connections = 8; reserved_connections = 2; local_idle_timeout_s = 4; };' >>"$CONF"
: >"$LOG"
start_wbd
hostile 8 0 15
read -r _ held _ <"$T/hostile.out"
((held == 6)) ||
	fail "the idle user holds $held of 8 connections, expected 6 (2 reserved)"
grep -q 'the last 2 are for new clients (limits.reserved_connections)' "$LOG" ||
	fail "the refusal does not name limits.reserved_connections"
served
wait "$HOSTILE_PID" || fail "the idle user's script failed"
assert_alive
stop_wbd
check_logs_clean || exit 1
