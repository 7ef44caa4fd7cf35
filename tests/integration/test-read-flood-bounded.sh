#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Clients that pipeline 32 MiB READs and never read the replies cannot grow
# wbd's memory past cache.size + limits.max_inflight_bytes + a fixed
# overhead: every request buffer is taken from the one budget, and a
# connection that finds it full reads nothing more.  Two rounds, 8 and then
# 64 such connections (the per-client cap) against a 64 MiB budget and a
# 64 MiB cache: RSS grows by less than 160 MiB (twice that under ASan) —
# before the budget 8 of them took wbd to 535 MB, 64 would take 4 GiB.
# Throughout, a client on a Unix socket does verified 64 KiB writes and
# reads on another export (the budget's reserve is for such clients), and
# when the flooders go, what they held is given back.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
# The flood as another user than the other client.
[[ $EUID == 0 ]] || skip "needs root, to make clients of another user"

add_export disk0 128M rw
add_export disk1 16M rw
write_config
# The whole budget to one client (limits.max_client_share = 100): the most
# memory a flood can make wbd hold.
echo 'limits = { max_inflight_bytes = "64M"; max_client_share = 100; };' >>"$CONF"
rss_bound 160
start_wbd

status_json() { "$WBCTL" -s "${SOCK%/*}/control.sock" status --json; }
before=$(vmrss_kib "$WBD_PID")

for conns in 8 64; do
	"$PYTHON" - "$PORT" "$(uri_unix disk1)" "$WBD_PID" "$T/peak" "$conns" "$SRCDIR" <<'PY' || fail "see above"
import os, socket, struct, sys, threading
port, uri, pid, peak_path, nconns = (int(sys.argv[1]), sys.argv[2],
    sys.argv[3], sys.argv[4], int(sys.argv[5]))
sys.path.insert(0, sys.argv[6])
from bystander import bystander
NBD_OPT_MAGIC = 0x49484156454F5054
NBD_REQUEST_MAGIC = 0x25609513
OPT_GO, REP_ACK = 7, 1
stop = threading.Event()
sent = [0]
errors = []

def recv_exact(s, n):
    b = b""
    while len(b) < n:
        chunk = s.recv(n - len(b))
        if not chunk:
            raise EOFError("server closed during the handshake")
        b += chunk
    return b

def connect():
    # The flood is another user than the client on the Unix socket
    # (root): this host's TCP clients are counted by the user owning the
    # socket, and 64 connections are one client's cap.
    os.seteuid(65534)
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    finally:
        os.seteuid(0)
    s.connect(("127.0.0.1", port))
    recv_exact(s, 18)                   # greeting
    s.sendall(struct.pack(">I", 3))     # fixed newstyle, no zeroes
    name = b"disk0"
    s.sendall(struct.pack(">QII", NBD_OPT_MAGIC, OPT_GO, 4 + len(name) + 2) +
              struct.pack(">I", len(name)) + name + struct.pack(">H", 0))
    while True:
        _, _, rtype, rlen = struct.unpack(">QIII", recv_exact(s, 20))
        recv_exact(s, rlen)
        if rtype == REP_ACK:
            return s
        if rtype & 0x80000000:
            raise RuntimeError("GO refused: 0x%x" % rtype)

def flood(s):
    s.settimeout(0.2)
    cookie = 0
    while not stop.is_set():
        cookie += 1
        off = (cookie * (32 << 20)) % (96 << 20)
        req = struct.pack(">IHHQQI", NBD_REQUEST_MAGIC, 0, 0, cookie, off,
                          32 << 20)
        try:
            s.sendall(req)
            sent[0] += 1
        except socket.timeout:
            pass                        # the daemon stopped reading us
        except OSError:
            break

socks = [connect() for _ in range(nconns)]
floods = [threading.Thread(target=flood, args=(s,)) for s in socks]
for t in floods:
    t.start()
peak, rounds = bystander(uri, pid, 5)
stop.set()
for t in floods:
    t.join(10)
for s in socks:
    s.close()
print("%d connections: peak RSS %d KiB; %d READs of 32 MiB sent; "
      "%d verified rounds by the other client" % (nconns, peak, sent[0], rounds))
open(peak_path, "w").write(str(peak))
PY
	peak=$(cat "$T/peak")
	log "$conns connections: RSS before $before KiB, peak $peak KiB"
	((peak - before < RSS_BOUND_MIB * 1024)) ||
		fail "RSS grew by $(((peak - before) / 1024)) MiB under a READ flood of $conns connections (bound: $RSS_BOUND_MIB MiB)"
	assert_alive
	# The round's connections gone before the next (64 more from the
	# same client would find the cap still holding some of these: one
	# run on a fast host had its 64th closed in the handshake).
	for _ in $(seq 100); do
		[[ $(status_json | "$PYTHON" -c 'import json, sys
print(json.load(sys.stdin)["limits"]["connections"])') == 0 ]] && break
		sleep 0.1
	done
done

# The flooders are gone: what they held is given back.
held=
for _ in $(seq 100); do
	held=$(status_json | "$PYTHON" -c 'import json, sys
l = json.load(sys.stdin)["limits"]
print(l["inflight_bytes"], l["inflight_waits"], l["max_inflight_bytes"])')
	[[ $held == "0 "* ]] && break
	sleep 0.1
done
read -r used waits limit <<<"$held"
[[ $used == 0 ]] || fail "$used bytes still held by the budget after the flooders left"
((waits > 0)) || fail "no connection ever waited for the budget"
((limit == 64 << 20)) || fail "status shows max_inflight_bytes $limit"
grep -q 'memory budget full' "$LOG" || fail "no log line when the budget was full"
"$WBCTL" -s "${SOCK%/*}/control.sock" status | grep -q 'max_inflight_bytes' ||
	fail "wbctl status does not show the budget"
stop_wbd
check_logs_clean || exit 1
