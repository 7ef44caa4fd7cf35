#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Clients that pipeline BLOCK_STATUS over a fragmented export and never
# read the replies cannot grow wbd's memory past its bounds: each request
# takes the largest reply it can get (64 KiB a context) from the same
# budget as READ and WRITE data (limits.max_inflight_bytes), and a
# connection that finds it full reads nothing more.  16 connections ask
# for base:allocation and wbd:dirty over 64 MiB with 8,192 data extents
# and as many holes: before, each reply was built and kept outside the
# budget (256 requests a connection, about 32 MiB each: 512 MiB here).
# wbctl status shows the budget held meanwhile, and nothing once they go.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

# The backing: 4 KiB of data every 8 KiB over 64 MiB (holes between).
"$PYTHON" - "$T/disk0.img" <<'PY'
import sys
with open(sys.argv[1], "wb") as f:
    f.truncate(64 << 20)
    for off in range(0, 64 << 20, 8192):
        f.seek(off)
        f.write(b"\x01" * 4096)
PY
add_export disk0 64M rw
write_config
echo 'limits = { max_inflight_bytes = "64M"; };' >>"$CONF"
rss_bound 128
start_wbd
status_json() { "$WBCTL" -s "${SOCK%/*}/control.sock" status --json; }
before=$(vmrss_kib "$WBD_PID")

"$PYTHON" - "$PORT" "$WBD_PID" "$T/peak" "$SRCDIR" >"$T/flood.log" 2>&1 <<'PY' &
import struct, sys, threading, time, types
port, pid, peak_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
sys.path.insert(0, sys.argv[4])
import nbdraw
stop = threading.Event()
sent = [0]

def connect():
    r = nbdraw.Raw(types.SimpleNamespace(tcp=port), tcp=True)
    r.open("disk0", structured=True, meta=("base:allocation", "wbd:dirty"))
    return r.s

def flood(s):
    s.settimeout(0.2)
    cookie = 0
    while not stop.is_set():
        cookie += 1
        try:
            s.sendall(struct.pack(">IHHQQI", nbdraw.NBD_REQUEST_MAGIC, 0,
                                  nbdraw.CMD_BLOCK_STATUS, cookie, 0,
                                  64 << 20))
            sent[0] += 1
        except socket.timeout:
            pass                        # the daemon stopped reading us
        except OSError:
            break

def rss():
    for line in open("/proc/%s/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

socks = [connect() for _ in range(8)]
floods = [threading.Thread(target=flood, args=(s,)) for s in socks]
for t in floods:
    t.start()
peak = 0
end = time.monotonic() + 4
while time.monotonic() < end:
    peak = max(peak, rss())
    time.sleep(0.05)
open(peak_path + ".held", "w").close()
while not __import__("os").path.exists(peak_path + ".seen"):
    time.sleep(0.05)
stop.set()
for t in floods:
    t.join(10)
for s in socks:
    s.close()
print("8 connections: peak RSS %d KiB; %d BLOCK_STATUS requests sent" %
      (peak, sent[0]))
open(peak_path, "w").write(str(peak))
PY
flooder=$!
for ((i = 0; i < 300; i++)); do
	[[ -e $T/peak.held ]] && break
	proc_alive "$flooder" || break
	sleep 0.1
done
[[ -e $T/peak.held ]] || fail "the flood did not start: $(cat "$T/flood.log")"
held=$(status_json | "$PYTHON" -c 'import json, sys
l = json.load(sys.stdin)["limits"]
print(l["inflight_bytes"], l["max_inflight_bytes"])')
touch "$T/peak.seen"
wait "$flooder" || fail "$(cat "$T/flood.log")"
cat "$T/flood.log"
read -r used limit <<<"$held"
((used > 0)) || fail "the budget held nothing while BLOCK_STATUS replies waited"
peak=$(cat "$T/peak")
log "RSS before $before KiB, peak $peak KiB; budget held $used of $limit bytes during the flood"
((peak - before < RSS_BOUND_MIB * 1024)) ||
	fail "RSS grew by $(((peak - before) / 1024)) MiB under a BLOCK_STATUS flood (bound: $RSS_BOUND_MIB MiB)"

# The flooders are gone: what they held is given back.
for _ in $(seq 100); do
	used=$(status_json | "$PYTHON" -c 'import json, sys
print(json.load(sys.stdin)["limits"]["inflight_bytes"])')
	((used == 0)) && break
	sleep 0.1
done
((used == 0)) || fail "$used bytes still held by the budget after the flooders left"
assert_alive
stop_wbd
