#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# limits.stall_timeout_s with a well-behaved connection and a flood of the
# same client (both root over TCP from 127.0.0.1: one client, one share of
# the memory budget).  The flood, 4 connections that pipeline 32 MiB READs
# and never read a reply, holds the client's share; the well-behaved
# connection, which reads every reply, then waits for the share with its
# 1 MiB READ.  When the stall timeout closes the flood's connection
# holding replies, the flood's connections waiting behind it go with it
# (they have never taken a reply), but the well-behaved one is not closed:
# its READ completes once the flood has given back its share, and it goes
# on being served.  Before, it was closed with the flood (it had sent no
# byte for half the stall timeout while it waited).
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

STALL_S=4
NFLOOD=4
add_export disk0 128M rw
add_export disk1 32M rw
write_config
echo "limits = { stall_timeout_s = $STALL_S; };" >>"$CONF"
start_wbd

"$PYTHON" - "$PORT" "$SRCDIR" "$WBCTL" "${SOCK%/*}/control.sock" "$STALL_S" "$NFLOOD" <<'PY' || fail "see above"
import json, os, socket, struct, subprocess, sys, threading, time
port, srcdir, wbctl, ctl = (int(sys.argv[1]), sys.argv[2], sys.argv[3],
    sys.argv[4])
stall_s, nflood = int(sys.argv[5]), int(sys.argv[6])
sys.path.insert(0, srcdir)
import nbd
from nbdraw import Raw, NBD_REQUEST_MAGIC

MiB = 1 << 20

def limits():
    out = subprocess.run([wbctl, "-s", ctl, "status", "--json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["limits"]

def tcp():
    # Every connection from 127.0.0.1, of this user: one client.
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(("127.0.0.1", port))
    return s

# The well-behaved connection, served once before the flood.
good = nbd.NBD()
good.set_export_name("disk1")
good.connect_socket(tcp().detach())
pattern = os.urandom(4 * MiB)
good.pwrite(pattern, 0)
if good.pread(4 * MiB, 0) != pattern:
    sys.exit("FAIL: the well-behaved connection read back wrong data")

def flood_conn():
    raw = Raw.__new__(Raw)
    raw.s, raw.structured = tcp(), False
    raw.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    raw.open("disk0")
    return raw.s

socks = [flood_conn() for _ in range(nflood)]
for s in socks:
    s.settimeout(0.5)
    for k in range(4):
        try:
            s.sendall(struct.pack(">IHHQQI", NBD_REQUEST_MAGIC, 0, 0, k + 1,
                                  k * 32 * MiB, 32 * MiB))
        except socket.timeout:
            break               # not read: paused at the share
started = time.monotonic()
while limits()["inflight_bytes"] < 32 * MiB:
    if time.monotonic() - started > 10:
        sys.exit("FAIL: the flood took no budget")
    time.sleep(0.05)
stalled0 = limits()["stalled"]

# The well-behaved connection reads 1 MiB after 1 MiB, each checked: the
# first waits for the share the flood holds.
took, errors, stop = [], [], threading.Event()
def reader():
    i = 0
    try:
        while not stop.is_set():
            off = (i % 4) * MiB
            t0 = time.monotonic()
            data = good.pread(1 * MiB, off)
            took.append(time.monotonic() - t0)
            if data != pattern[off:off + MiB]:
                errors.append("read back wrong data at %d" % off)
                return
            i += 1
    except nbd.Error as e:
        errors.append("closed after %d READs: %s" % (len(took), e))
t = threading.Thread(target=reader, daemon=True)
t.start()

# The stall timeout frees the whole flood (the connections holding
# replies and those waiting behind them), but not the well-behaved one.
first = None
while True:
    lim = limits()
    now = time.monotonic()
    if first is None and lim["stalled"] > stalled0:
        first = now
        print("the first flooding connection closed %.1f s after the flood "
              "began" % (now - started))
    if lim["connections"] <= 1 and lim["stalled"] >= stalled0 + nflood:
        break
    if errors:
        break
    if (now - started > 3 * stall_s + 60 or
            (first is not None and now - first > stall_s + 2)):
        sys.exit("FAIL: %.1f s after the flood began, %d connections open, "
                 "%d stalled" % (now - started, lim["connections"],
                                 lim["stalled"] - stalled0))
    time.sleep(0.2)
# Served on after the flood has gone.
n = len(took)
end = time.monotonic() + 10
while len(took) < n + 20 and time.monotonic() < end and not errors:
    time.sleep(0.05)
stop.set()
t.join(20)
if errors:
    sys.exit("FAIL: the well-behaved connection of the flooding client: %s"
             % errors[0])
if not took or max(took) < stall_s / 2:
    sys.exit("FAIL: the well-behaved connection never waited for its "
             "client's share (longest READ %.2f s): nothing was tested"
             % (max(took) if took else 0))
if len(took) < n + 20:
    sys.exit("FAIL: the well-behaved connection was not served after the "
             "flood was freed (%d READs in 10 s)" % (len(took) - n))
lim = limits()
if lim["stalled"] - stalled0 != nflood or lim["connections"] != 1:
    sys.exit("FAIL: %d connections closed as stalled (the flood's %d), %d "
             "open (the well-behaved one)" % (lim["stalled"] - stalled0,
                                              nflood, lim["connections"]))
print("the well-behaved connection waited %.1f s for its client's share, "
      "then made %d more READs; the flood's %d connections were closed"
      % (max(took), len(took) - n, nflood))
good.shutdown()
for s in socks:
    s.close()
PY
assert_alive
stop_wbd
check_logs_clean || exit 1
log "PASS"
