#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A listener's own idle_timeout_s overrides the limits' for the
# connections it accepts.  Three TCP listeners, every client of this host
# (limits.local_idle_timeout_s = 4): the first written as a string keeps
# the limits' 4 s; the second, { idle_timeout_s = 1; }, closes its idle
# connections after 1 s; the third, { idle_timeout_s = 0; }, never does
# (the listener a kernel client would attach through).  Four idle
# connections (past the handshake, sending nothing) on each: those of the
# first are closed after about 4 s, those of the second after about 1 s,
# none of the third in 8 s.  wbctl status shows each listener's
# idle_timeout_s, and the log names the listener's as the reason.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
[[ -x /usr/bin/python3 ]] || skip "/usr/bin/python3 not found"

add_export disk0 16M rw
write_config
PORT2=$(free_port)
PORT3=$(free_port)
while [[ $PORT3 == "$PORT2" || $PORT3 == "$PORT" ]]; do PORT3=$(free_port); done
[[ $PORT2 != "$PORT" ]] || PORT2=$(free_port)
sed -i "s|tcp = \[ \"127.0.0.1:$PORT\" \];|tcp = ( \"127.0.0.1:$PORT\", { address = \"127.0.0.1:$PORT2\"; idle_timeout_s = 1; }, { address = \"127.0.0.1:$PORT3\"; idle_timeout_s = 0; } );|" "$CONF"
grep -q "idle_timeout_s = 0" "$CONF" || fail "the listeners were not written: $(cat "$CONF")"
echo 'limits = { local_idle_timeout_s = 4; };' >>"$CONF"
"$WBD" -n -c "$CONF" >"$T/check.out" 2>&1 ||
	fail "wbd -n refuses the listeners: $(cat "$T/check.out")"
start_wbd

# idle PORT N WAIT: N idle connections to PORT, in the background (lines
# in $T/idle-PORT.out: "held N extra 0", then "closed C after S s").
idle() {
	/usr/bin/python3 - "$1" disk0 "$2" 0 "$3" \
		<"$SRCDIR/hostile-idle.py" >"$T/idle-$1.out" 2>&1 &
	_PIDS+=("$!")
	IDLE_PIDS+=("$!")
}
IDLE_PIDS=()
idle "$PORT" 4 10
idle "$PORT2" 4 10
idle "$PORT3" 4 8

status=$("$WBCTL" -s "$T/control.sock" status --json) ||
	fail "wbctl status failed"
/usr/bin/python3 - "$status" "$PORT" "$PORT2" "$PORT3" <<'PY' || fail "see above"
import json, sys
st = json.loads(sys.argv[1])
got = {(l["kind"], l["address"]): l["idle_timeout_s"] for l in st["listeners"]}
want = {("tcp", "127.0.0.1:" + sys.argv[2]): None,
        ("tcp", "127.0.0.1:" + sys.argv[3]): 1,
        ("tcp", "127.0.0.1:" + sys.argv[4]): 0}
for k, v in want.items():
    if k not in got or got[k] != v:
        sys.exit("FAIL: status: listener %s has idle_timeout_s %r, expected %r"
                 " (listeners: %r)" % (k, got.get(k, "missing"), v,
                                       st["listeners"]))
if st["limits"]["local_idle_timeout_s"] != 4:
    sys.exit("FAIL: status: limits.local_idle_timeout_s is %r"
             % st["limits"]["local_idle_timeout_s"])
PY
text=$("$WBCTL" -s "$T/control.sock" status) || fail "wbctl status failed"
grep -q "listener  *tcp 127.0.0.1:$PORT2: idle timeout 1 s (its idle_timeout_s)" <<<"$text" &&
	grep -q "listener  *tcp 127.0.0.1:$PORT3: idle timeout never (its idle_timeout_s)" <<<"$text" &&
	grep -q "listener  *tcp 127.0.0.1:$PORT: idle timeout by client (limits)" <<<"$text" ||
	{ echo "$text" >&2; fail "wbctl status does not show the listeners' idle timeouts"; }

for pid in "${IDLE_PIDS[@]}"; do
	wait "$pid" || fail "an idle client's script failed"
done
for p in "$PORT" "$PORT2" "$PORT3"; do
	echo "port $p: $(tr '\n' ' ' <"$T/idle-$p.out")" >&2
	read -r _ held _ <"$T/idle-$p.out"
	((held == 4)) || fail "$held of 4 idle connections held on port $p"
done
read -r _ c1 _ s1 _ < <(sed -n 2p "$T/idle-$PORT.out")
read -r _ c2 _ s2 _ < <(sed -n 2p "$T/idle-$PORT2.out")
read -r _ c3 _ s3 _ < <(sed -n 2p "$T/idle-$PORT3.out")
((c1 == 4)) || fail "$c1 of 4 idle connections closed on the limits' listener"
awk -v s="$s1" 'BEGIN { exit !(s >= 2.5 && s <= 8) }' ||
	fail "the limits' listener closed its idle connections after $s1 s (4 s)"
((c2 == 4)) || fail "$c2 of 4 idle connections closed on the 1 s listener"
awk -v s="$s2" 'BEGIN { exit !(s <= 3) }' ||
	fail "the 1 s listener closed its idle connections after $s2 s"
((c3 == 0)) || fail "$c3 idle connections closed on the listener that never closes them"
grep -q "no request for 1 s (the listener's idle_timeout_s); closing" "$LOG" ||
	fail "the log does not name the listener's idle_timeout_s"
grep -q "no request for 4 s (limits.local_idle_timeout_s); closing" "$LOG" ||
	fail "the log does not name limits.local_idle_timeout_s"
status=$("$WBCTL" -s "$T/control.sock" status --json)
/usr/bin/python3 - "$status" <<'PY' || fail "see above"
import json, sys
lim = json.loads(sys.argv[1])["limits"]
if lim["idle_closed"] != 8:
    sys.exit("FAIL: status: %d idle closed, expected 8" % lim["idle_closed"])
PY
assert_alive
stop_wbd
check_logs_clean || exit 1
