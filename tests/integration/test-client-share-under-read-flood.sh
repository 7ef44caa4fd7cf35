#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# limits.max_client_share: one client (127.0.0.1) floods with 4, then 16,
# connections that pipeline 32 MiB READs (8, then one every 0.2 s) and
# never read a reply; another client (127.0.0.2, as user nobody: this
# host's clients are told apart by user) times a 1 MiB WRITE and
# a 16 MiB READ meanwhile.  The flooder holds no more than its share of
# limits.max_inflight_bytes (wbctl status), so the other client's requests
# complete within a second of their unloaded time (measured first, in the
# same test) instead of waiting for the budget.  Once the flood has sent
# nothing for limits.stall_timeout_s, all its connections are closed at
# once, those holding replies and those waiting behind them, and the
# budget goes back to 0 while the flooder still holds its sockets open.
# Before the share, the 1 MiB WRITE waited 7 s for the stall timeout with
# 4 connections and for ever with 16: the connections read the dripped
# READs while waiting for the budget, which kept them from looking stalled.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
# Clients of several users (this host's TCP clients are told apart by user).
[[ $EUID == 0 ]] || skip "needs root, to make clients of other users"

STALL_S=6
add_export disk0 128M rw
add_export disk1 32M rw
write_config
echo "limits = { stall_timeout_s = $STALL_S; };" >>"$CONF"

start_wbd

"$PYTHON" - "$PORT" "$SRCDIR" "$WBCTL" "${SOCK%/*}/control.sock" "$STALL_S" <<'PY' || fail "see above"
import json, os, socket, struct, subprocess, sys, threading, time
port, srcdir, wbctl, ctl, stall_s = (int(sys.argv[1]), sys.argv[2],
    sys.argv[3], sys.argv[4], int(sys.argv[5]))
sys.path.insert(0, srcdir)
import nbd
from nbdraw import Raw, NBD_REQUEST_MAGIC

MiB = 1 << 20
MARGIN_S = 1.0                  # "within a second of the unloaded time"
# Under ThreadSanitizer (scripts/test-tsan.sh sets WBD_TSAN=1) every
# request is several times slower and its time varies with it: the margin
# grows with the unloaded time (set below).  Waiting behind the flood
# takes a stall timeout or more, still far beyond it.
TSAN = os.environ.get("WBD_TSAN") == "1"
# The well-behaved client is another user than the flood (root): this
# host's clients are told apart by user, whatever address they bind.
VICTIM_UID = 65534

def limits():
    out = subprocess.run([wbctl, "-s", ctl, "status", "--json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["limits"]

def tcp(src, uid=None):
    """A TCP connection from SRC; with UID, a socket of that user (made
    under that effective uid): a client on this host is counted by the
    user that owns its socket, not by its address."""
    if uid is not None:
        os.seteuid(uid)
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    finally:
        if uid is not None:
            os.seteuid(0)
    s.settimeout(20)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s

def victim():
    """The well-behaved client, from 127.0.0.2: the seconds its 1 MiB
    WRITE and its 16 MiB READ took."""
    h = nbd.NBD()
    h.set_export_name("disk1")
    h.connect_socket(tcp("127.0.0.2", VICTIM_UID).detach())
    buf = os.urandom(1 * MiB)
    t0 = time.monotonic()
    h.pwrite(buf, 8 * MiB)
    t1 = time.monotonic()
    data = h.pread(16 * MiB, 0)
    t2 = time.monotonic()
    if data[8 * MiB:9 * MiB] != buf:
        sys.exit("FAIL: the well-behaved client read back wrong data")
    h.shutdown()
    return t1 - t0, t2 - t1

def timed_victim(limit_s):
    """victim() if it is done within LIMIT_S, else the test fails (a
    request waiting for the budget may wait for as long as the flood)."""
    got = []
    t = threading.Thread(target=lambda: got.append(victim()), daemon=True)
    t.start()
    t.join(limit_s)
    if not got:
        sys.exit("FAIL: the well-behaved client's 1 MiB WRITE and 16 MiB "
                 "READ were not done in %.1f s" % limit_s)
    return got[0]

# Unloaded: the slowest of three, each kind, once the data is cached (as
# it is for the timed runs under the flood).
victim()
w0 = r0 = 0.0
for _ in range(3):
    w, r = victim()
    w0, r0 = max(w0, w), max(r0, r)
print("unloaded: 1 MiB WRITE %.3f s, 16 MiB READ %.3f s" % (w0, r0))
if TSAN:
    MARGIN_S = 1.0 + 3 * (w0 + r0)
    print("ThreadSanitizer: %.1f s allowed above the unloaded time" % MARGIN_S)

def flood_conn():
    raw = Raw.__new__(Raw)
    raw.s, raw.structured = tcp("127.0.0.1"), False
    raw.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    raw.open("disk0")
    return raw.s

def flood(s, stop):
    # 8 READs at once, then one every 0.2 s: a connection waiting for the
    # budget reads them, so it never looks idle by what it receives.
    s.settimeout(0.2)
    cookie = 0
    while not stop.is_set():
        cookie += 1
        if cookie > 8:
            stop.wait(0.2)
        off = (cookie * (32 * MiB)) % (96 * MiB)
        try:
            s.sendall(struct.pack(">IHHQQI", NBD_REQUEST_MAGIC, 0, 0, cookie,
                                  off, 32 * MiB))
        except socket.timeout:
            pass                # not read: the daemon paused us
        except OSError:
            break               # closed by the daemon

for nconns in (4, 16):
    socks = [flood_conn() for _ in range(nconns)]
    stop = threading.Event()
    threads = [threading.Thread(target=flood, args=(s, stop), daemon=True)
               for s in socks]
    started = time.monotonic()
    for t in threads:
        t.start()
    # Until the flood holds what it can.
    while limits()["inflight_bytes"] < 32 * MiB:
        if time.monotonic() - started > 10:
            sys.exit("FAIL: the flood of %d connections took no budget" % nconns)
        time.sleep(0.05)
    time.sleep(0.5)
    for i in range(3):
        w, r = timed_victim(w0 + r0 + MARGIN_S + 10)
        print("%d flooding connections: 1 MiB WRITE %.3f s, 16 MiB READ "
              "%.3f s" % (nconns, w, r))
        if w > w0 + MARGIN_S or r > r0 + MARGIN_S:
            sys.exit("FAIL: with %d flooding connections the well-behaved "
                     "client took %.3f s to WRITE 1 MiB and %.3f s to READ "
                     "16 MiB (unloaded %.3f s and %.3f s, + %.1f s allowed)"
                     % (nconns, w, r, w0, r0, MARGIN_S))
    lim = limits()
    print("the flood holds %d bytes of %d (share %d%%), %d waits"
          % (lim["inflight_bytes"], lim["max_inflight_bytes"],
             lim.get("max_client_share", -1), lim["inflight_waits"]))
    if (lim["inflight_bytes"] > lim["client_share_bytes"] or
            lim["client_inflight_max_bytes"] != lim["inflight_bytes"] or
            lim["client_share_waits"] == 0):
        sys.exit("FAIL: the flood holds %d bytes, more than its share %d, "
                 "or status is wrong: %s" % (lim["inflight_bytes"],
                                            lim["client_share_bytes"], lim))
    # The stall timeout frees every flooding connection: nothing is held
    # and no connection is open, though the flooder keeps its sockets.
    # All at once: within a stall timeout (and 2 s) of the first closed,
    # those holding replies (when they last sent a byte may differ by
    # seconds on a loaded machine, or under a sanitizer) and those waiting
    # behind them.  Freed in turn, as before the share, the next waited a
    # stall timeout more, 3 turns and more with 16 connections.
    stalled0, first = lim["stalled"], None
    while True:
        lim = limits()
        now = time.monotonic()
        if first is None and lim["stalled"] > stalled0:
            first = now
            print("the first flooding connection closed %.1f s after the "
                  "flood began" % (now - started))
        if lim["connections"] == 0 and lim["inflight_bytes"] == 0:
            break
        if (now - started > 3 * stall_s + 60 or
                (first is not None and now - first > stall_s + 2)):
            sys.exit("FAIL: %.1f s after the flood of %d connections began, "
                     "%s after the first was closed (stall_timeout_s %d), "
                     "%d connections are open and %d bytes of the budget "
                     "held" % (now - started, nconns,
                               "%.1f s" % (now - first) if first else "none",
                               stall_s, lim["connections"],
                               lim["inflight_bytes"]))
        time.sleep(0.2)
    print("%d flooding connections freed %.1f s after the flood began; "
          "%d stalled in all" % (nconns, time.monotonic() - started,
                                 lim["stalled"]))
    stop.set()
    for t in threads:
        t.join(10)
    for s in socks:
        s.close()
PY
grep -q 'client uid 0 holds .* its share of the memory budget (limits.max_client_share = 25% of 268435456 bytes)' "$LOG" ||
	fail "no log line when the flooder reached its share"
"$WBCTL" -s "${SOCK%/*}/control.sock" status | grep -Eq 'per client +64.0 MiB \(max_client_share 25%\)' ||
	fail "wbctl status does not show max_client_share"
# A reload applies a new share at once.
sed -i "s/stall_timeout_s = $STALL_S;/stall_timeout_s = $STALL_S; max_client_share = 50;/" "$CONF"
"$WBCTL" -s "${SOCK%/*}/control.sock" reload | grep -q 'limits.max_client_share changed' ||
	fail "wbctl reload did not apply limits.max_client_share"
"$WBCTL" -s "${SOCK%/*}/control.sock" status --json | "$PYTHON" -c 'import json, sys
l = json.load(sys.stdin)["limits"]
sys.exit(l["max_client_share"] != 50 or l["client_share_bytes"] != 128 << 20)' ||
	fail "status does not show the reloaded share"
assert_alive
stop_wbd
check_logs_clean || exit 1
