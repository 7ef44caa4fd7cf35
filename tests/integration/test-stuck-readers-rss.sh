#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Stuck readers: clients that pipeline 32 MiB READs and never read a reply
# keep wbd's RSS within the bound wbd.conf(5) states for
# limits.max_inflight_bytes: cache.size (faulted in at start, so part of
# the RSS before) + the budget + a fixed overhead of about 130 KiB per open
# connection and what each thread keeps for its next use.  With the
# default budget (256 MiB), 16 and then 64 such connections (the
# per-client cap) against a 128 MiB cache, each for 8 s: RSS grows by less
# than the budget + 130 KiB a connection + STUCK_SLACK_MIB (what the
# threads keep and malloc's own; twice the whole under ASan).
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

: "${STUCK_SLACK_MIB:=96}"
add_export disk0 512M rw
write_cache_config 128M ''
# The budget, 130 KiB for each of 64 connections, and the slack.
rss_bound $((256 + (64 * 130 + 1023) / 1024 + STUCK_SLACK_MIB))
start_wbd
before=$(vmrss_kib "$WBD_PID")
for conns in 16 64; do
	bound_mib=$RSS_BOUND_MIB
	"$PYTHON" - "$PORT" "$WBD_PID" "$T/peak" "$conns" <<'PY' || fail "see above"
import socket, struct, sys, threading, time
port, pid, peak_path, nconns = (int(sys.argv[1]), sys.argv[2], sys.argv[3],
                                int(sys.argv[4]))
NBD_OPT_MAGIC = 0x49484156454F5054
NBD_REQUEST_MAGIC = 0x25609513
OPT_GO, REP_ACK = 7, 1
stop = threading.Event()
sent = [0]

def rss():
    for l in open("/proc/%s/status" % pid):
        if l.startswith("VmRSS"):
            return int(l.split()[1])

def recv_exact(s, n):
    b = b""
    while len(b) < n:
        chunk = s.recv(n - len(b))
        if not chunk:
            raise EOFError("server closed during the handshake")
        b += chunk
    return b

def connect():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    recv_exact(s, 18)
    s.sendall(struct.pack(">I", 3))
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

def flood(s, i):
    s.settimeout(0.2)
    cookie = 0
    while not stop.is_set():
        cookie += 1
        off = ((i + cookie) * (32 << 20)) % (480 << 20)
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
floods = [threading.Thread(target=flood, args=(s, i))
          for i, s in enumerate(socks)]
for t in floods:
    t.start()
peak, end = 0, time.monotonic() + 8
while time.monotonic() < end:
    peak = max(peak, rss())
    time.sleep(0.05)
stop.set()
for t in floods:
    t.join(10)
for s in socks:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
print("%d stuck readers: peak RSS %d KiB; %d READs of 32 MiB sent"
      % (nconns, peak, sent[0]))
open(peak_path, "w").write(str(peak))
PY
	peak=$(<"$T/peak")
	log "$conns stuck readers: RSS $before KiB at start, peak $peak KiB: +$(((peak - before) / 1024)) MiB (bound +$bound_mib MiB)"
	((peak - before < bound_mib * 1024)) ||
		fail "RSS grew by $(((peak - before) / 1024)) MiB under $conns stuck readers (bound: $bound_mib MiB)"
	assert_alive
	# The next round takes the whole per-client cap: these go first.
	for ((i = 0; i < 300; i++)); do
		n=$("$WBCTL" -s "$T/control.sock" status --json |
			"$PYTHON" -c 'import json, sys
print(json.load(sys.stdin)["limits"]["connections"])')
		((n == 0)) && break
		sleep 0.1
	done
	((n == 0)) || fail "$n connections still open 30 s after the stuck readers left"
done
stop_wbd "$WBD_PID" TERM 60
check_logs_clean || exit 1
