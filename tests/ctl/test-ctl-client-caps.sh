#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The control socket cannot be taken from root: with control.max_clients
# = 24, max_clients_per_uid = 6 and admin_reserved = 4, one uid holds at
# most 6 clients and the last 4 of the 24 slots are kept for root and the
# admin group, so four unprivileged uids holding idle connections leave
# root's wbctl status working; refusals are counted (wbctl status:
# control.refused) and logged once per 10 s, and a refused wbctl prints
# wbd's reason.  A request line over 64 KiB
# is answered EPROTO and counted (control.oversized_requests).  And a
# client that sends status requests without reading the answers cannot
# grow the daemon: beyond 1 MiB of unread answers it is not read.
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"
need setpriv
setpriv --reuid=60001 --regid=60001 --clear-groups true ||
	skip "setpriv cannot switch uids"

add_export disk0 16M rw
chmod 755 "$T"
CTL_EXTRA='mode = "0666"; max_clients = 24; max_clients_per_uid = 6; admin_reserved = 4;'
rss_bound 16
start_wbd

# hold UID N: as UID, open N connections and hold them; print how many
# the daemon kept (each is asked for its version; a refused one is closed).
cat >"$T/hold.py" <<'PY'
import json, socket, sys, time
path, n, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
kept = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(path)
    try:
        s.sendall(b'{"v":1,"cmd":"version"}\n')
        line = s.makefile("rb").readline()
    except OSError:
        line = b""
    if line and json.loads(line).get("ok"):
        kept.append(s)
    else:
        s.close()
print(len(kept), flush=True)
time.sleep(secs)
PY
pids=()
for uid in 60001 60002 60003 60004; do
	setpriv --reuid=$uid --regid=$uid --clear-groups \
		"$SYSPY" "$T/hold.py" "$CTL" 20 15 >"$T/held.$uid" &
	pids+=($!)
done
for _ in $(seq 100); do
	all=1
	for uid in 60001 60002 60003 60004; do
		[[ -s $T/held.$uid ]] || all=0
	done
	((all)) && break
	sleep 0.1
done
total=0
for uid in 60001 60002 60003 60004; do
	n=$(cat "$T/held.$uid")
	((n <= 6)) || fail "uid $uid holds $n control clients (at most 6)"
	total=$((total + n))
done
((total == 20)) || fail "unprivileged uids hold $total clients, expected 20 (24 less 4 kept)"
expect_exit 0 wbctl status
grep -Eq 'control socket +2[0-9] of 24 clients \(max_clients\), at most 6 per uid, the last 4 for admins' <<<"$OUT" ||
	fail "wbctl status has no control socket line: $(grep -i 'control' <<<"$OUT")"
expect_exit 0 wbctl status --json
read -r clients refused <<<"$("$SYSPY" -c 'import json, sys
c = json.load(sys.stdin)["control"]
print(c["clients"], c["refused"])' <<<"$OUT")"
((clients == 21 && refused == 60)) ||
	fail "status control: $clients clients and $refused refused, expected 21 and 60"
log "four uids hold $total clients, $refused refused; root's status still answers"
n=$(grep -c 'control: refused a client' "$LOG")
((n == 1)) || fail "$n refusal lines logged, expected 1"
# A refused wbctl says why, not "Broken pipe".
rc=0
out=$(setpriv --reuid=60001 --regid=60001 --clear-groups "$WBCTL" -s "$CTL" version 2>&1) || rc=$?
((rc != 0)) || fail "wbctl of a uid at its limit exited 0: $out"
# Its own limit, or the slots kept for admins, whichever it meets first.
grep -Eq 'wbd refused the connection: .*\(control\.(max_clients_per_uid|admin_reserved)\)' <<<"$out" ||
	fail "a refused wbctl does not say why: $out"
log "a refused wbctl: $out (exit $rc)"
kill "${pids[@]}" 2>/dev/null
wait "${pids[@]}" 2>/dev/null || true

log "status requests without reading the answers"
"$SYSPY" - "$CTL" "$WBD_PID" "$RSS_BOUND_MIB" <<'PY' || fail "see above"
import socket, sys, time
path, pid, bound_mib = sys.argv[1], sys.argv[2], int(sys.argv[3])

def rss_kib():
    for line in open("/proc/%s/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

before = rss_kib()
s = socket.socket(socket.AF_UNIX)
s.connect(path)
s.settimeout(0.2)
req = b'{"v":1,"cmd":"status"}\n' * 1000
sent, end, peak = 0, time.monotonic() + 6, 0
while time.monotonic() < end:
    try:
        sent += s.send(req)
    except socket.timeout:
        pass
    peak = max(peak, rss_kib())
print("%d requests sent; RSS %d KiB before, peak %d KiB while unread"
      % (sent // 24, before, peak))
s.close()
if peak - before > bound_mib * 1024:
    sys.exit("FAIL: the daemon grew by %d MiB under unread answers "
             "(bound: %d MiB)" % ((peak - before) // 1024, bound_mib))
PY
expect_exit 0 wbctl status
stop_wbd
check_logs_clean || exit 1
