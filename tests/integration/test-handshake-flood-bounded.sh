#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Clients that send NBD_OPT_INFO over and over in the handshake and never
# read a reply cannot grow wbd's memory: a connection with 64 KiB of
# replies unsent is not read any further (counted in wbctl status's
# limits.connection_pauses, and logged once in 10 s).  Four such clients
# for 8 s add less than 48 MiB to the daemon's RSS (96 MiB under ASan)
# (before the bound they took it from 7 MB to 2 GB in 24 s), and meanwhile
# another client's verified writes and reads on the export go on.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export disk0 16M rw
rss_bound 48
start_wbd

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$WBD_PID/status"; }
before=$(rss_kib)

"$PYTHON" - "$PORT" "$(uri_unix disk0)" "$WBD_PID" "$T/peak" "$SRCDIR" <<'PY' || fail "see above"
import socket, struct, sys, threading
port, uri, pid, peak_path = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
sys.path.insert(0, sys.argv[5])
from bystander import bystander
NBD_OPT_MAGIC = 0x49484156454F5054
OPT_INFO = 6
name = b"disk0"
info = (struct.pack(">QII", NBD_OPT_MAGIC, OPT_INFO, 4 + len(name) + 2) +
        struct.pack(">I", len(name)) + name + struct.pack(">H", 0))
stop = threading.Event()
sent = [0]

def flood():
    s = socket.create_connection(("127.0.0.1", port))
    s.recv(18)                          # the greeting, once
    s.sendall(struct.pack(">I", 3))     # fixed newstyle, no zeroes
    s.settimeout(0.2)
    burst = info * 256
    while not stop.is_set():
        try:
            sent[0] += s.send(burst)
        except socket.timeout:
            pass                        # the daemon stopped reading us
        except OSError:
            break
    s.close()

floods = [threading.Thread(target=flood) for _ in range(4)]
for t in floods:
    t.start()
peak, _ = bystander(uri, pid, 8)
stop.set()
for t in floods:
    t.join(10)
print("peak RSS %d KiB; %d MiB of options sent by the flooders"
      % (peak, sent[0] >> 20))
open(peak_path, "w").write(str(peak))
PY
peak=$(cat "$T/peak")
log "RSS before $before KiB, peak $peak KiB"
((peak - before < RSS_BOUND_MIB * 1024)) ||
	fail "RSS grew by $(((peak - before) / 1024)) MiB under the handshake flood (bound: $RSS_BOUND_MIB MiB)"
# The pauses are counted and said (once in 10 s).
pauses=$("$WBCTL" -s "${SOCK%/*}/control.sock" status --json |
	"$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["limits"]["connection_pauses"])')
((pauses >= 4)) || fail "limits.connection_pauses is $pauses with four flooders"
n=$(grep -Ec 'bytes of handshake replies unread \(more than 65536\): reading no more options' "$LOG" || true)
((n >= 1 && n <= 2)) || fail "$n log lines for the paused flooders (expected 1, at most once in 10 s)"
assert_alive
stop_wbd
check_logs_clean || exit 1
