#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A FLUSH that has one run to write, on a remote that offers FUA, with
# nothing else written and not yet flushed, sends that run as a write
# with FUA and no NBD_CMD_FLUSH (one round trip instead of two); the data
# is then in the remote's stable store (flushed-only.py saves it only on
# a FLUSH or a FUA write).  A FLUSH with two runs, or one run while
# something else written (a WRITE_ZEROES) is not yet flushed, still sends
# its writes and a FLUSH.  With write-behind, a lone page written back
# while nothing else is unflushed goes with FUA too, and the FLUSH after
# it sends nothing.  nbdkit's log filter shows what reached the remote.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl
nbdkit python --version >/dev/null 2>&1 ||
	skip "nbdkit's python plugin (nbdkit-plugin-python) is not installed"

STORE=$T/remote.img
KLOG=$T/kit-requests.log
start_nbdkit kit --filter=log python "$SRCDIR/flushed-only.py" \
	file="$STORE" size=$((16 << 20)) logfile="$KLOG"
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")"
write_cache_config 64M 'dirty_background_ratio = 50; dirty_ratio = 80; dirty_writeback_centisecs = 0;'
# Dirty data waits for the FLUSH: no write-behind, no commits.
add_remote_settings 'write_behind = false; commit_interval_ms = 0;'
start_wbd

"$PYTHON" - "$(uri_unix disk0)" "$KLOG" "$STORE" <<'PY' || fail "see above"
import nbd, os, sys
uri, klog, store = sys.argv[1:4]
h = nbd.NBD()
h.connect_uri(uri)

def since(mark):
    with open(klog) as f:
        f.seek(mark)
        return [l for l in f.read().splitlines()
                if " Write id=" in l or " Flush id=" in l or " Zero id=" in l]

def stored(off, n):
    with open(store, "rb") as f:
        f.seek(off)
        return f.read(n)

# 1. One run (64 KiB, 16 pages touching), nothing else unflushed: one
#    write with FUA, no FLUSH, and the data is stable on the remote.
one = os.urandom(65536)
h.pwrite(one, 1 << 20)
mark = os.path.getsize(klog)
h.flush()
lines = since(mark)
writes = [l for l in lines if " Write id=" in l]
flushes = [l for l in lines if " Flush id=" in l]
if len(writes) != 1 or "fua=1" not in writes[0] or flushes:
    sys.exit("FAIL: a FLUSH of one run should reach the remote as one "
             "write with FUA and no flush:\n" + "\n".join(lines))
if stored(1 << 20, 65536) != one:
    sys.exit("FAIL: after the FLUSH the remote's stable store does not "
             "hold the run")

# 2. Two runs (not touching): plain writes, then one FLUSH.
a, b = os.urandom(4096), os.urandom(4096)
h.pwrite(a, 0)
h.pwrite(b, 8 << 20)
mark = os.path.getsize(klog)
h.flush()
lines = since(mark)
writes = [l for l in lines if " Write id=" in l]
flushes = [l for l in lines if " Flush id=" in l]
if len(writes) != 2 or any("fua=1" in l for l in writes) or len(flushes) != 1:
    sys.exit("FAIL: a FLUSH of two runs should send two writes and a "
             "flush:\n" + "\n".join(lines))
if stored(0, 4096) != a or stored(8 << 20, 4096) != b:
    sys.exit("FAIL: after the FLUSH the remote's stable store does not "
             "hold both runs")

# 3. Something else written and not yet flushed (WRITE_ZEROES goes to the
#    remote at once), then one run: the FLUSH must flush the remote too.
h.zero(4096, 8 << 20)
c = os.urandom(4096)
h.pwrite(c, 4 << 20)
mark = os.path.getsize(klog)
h.flush()
lines = since(mark)
if not [l for l in lines if " Flush id=" in l]:
    sys.exit("FAIL: a FLUSH with a WRITE_ZEROES not yet flushed sent no "
             "flush:\n" + "\n".join(lines))
if stored(8 << 20, 4096) != bytes(4096) or stored(4 << 20, 4096) != c:
    sys.exit("FAIL: after the FLUSH the remote's stable store does not "
             "hold the zeroes and the write")

# 4. Nothing written since: nothing reaches the remote.
mark = os.path.getsize(klog)
h.flush()
if since(mark):
    sys.exit("FAIL: a FLUSH with nothing to do reached the remote:\n" +
             "\n".join(since(mark)))
h.shutdown()
PY

# wbctl status counts the FLUSH made with FUA (part 1).
fua=$(remote_wbctl status --json | "$PYTHON" -c 'import json, sys
d = [d for d in json.load(sys.stdin)["devices"] if d["remote"]][0]
print(d["link"]["flushes_by_fua"])')
((fua == 1)) || fail "wbctl status counts $fua FLUSHes made with FUA, not 1"

# 5. Write-behind on: a lone page written while nothing else is unflushed,
#    by a client that FLUSHes, goes with FUA (it is in the stable store
#    before its FLUSH), and the FLUSH that follows finds nothing to send.
#    A client that never FLUSHes gets plain writes (and commits).
# (The periodic pass, every second, resumes write-behind that yielded.)
sed -i 's/write_behind = false;/write_behind = true;/; s/dirty_writeback_centisecs = 0;/dirty_writeback_centisecs = 100;/' "$CONF"
reload_remote
"$PYTHON" - "$(uri_unix disk0)" "$KLOG" "$STORE" "$WBCTL" "$T/control.sock" <<'PY' || fail "see above"
import json, nbd, os, subprocess, sys, time
uri, klog, store, wbctl, ctl = sys.argv[1:6]
h = nbd.NBD()
h.connect_uri(uri)

def dirty():
    """Dirty bytes, and those being written back (a page under writeback
    is no longer dirty)."""
    out = subprocess.run([wbctl, "-s", ctl, "status", "--json"], check=True,
                         capture_output=True, text=True).stdout
    st = json.loads(out)
    dev = [d for d in st["devices"] if d["remote"]][0]
    return st["cache"]["dirty_bytes"] + dev["link"]["bytes_in_flight"]

def stored(off, n):
    with open(store, "rb") as f:
        f.seek(off)
        return f.read(n)

for i in range(3):
    buf = os.urandom(4096)
    off = (2 << 20) + i * (1 << 20)
    h.flush()  # nothing to do: a client that FLUSHes (5 s)
    h.pwrite(buf, off)
    for _ in range(300):
        if dirty() == 0:
            break
        time.sleep(0.1)
    else:
        sys.exit("FAIL: write-behind did not write the page back")
    if stored(off, 4096) != buf:
        sys.exit("FAIL: write-behind's lone page is not in the remote's "
                 "stable store: written without FUA")
    mark = os.path.getsize(klog)
    h.flush()
    with open(klog) as f:
        f.seek(mark)
        lines = [l for l in f.read().splitlines()
                 if " Flush id=" in l or " Write id=" in l]
    if lines:
        sys.exit("FAIL: the FLUSH after write-behind wrote the page with "
                 "FUA sent:\n" + "\n".join(lines))

# No FLUSH for more than 5 s: write-behind writes plainly (its remote is
# not asked for a sync per page), and the FLUSH then flushes.
time.sleep(6)
buf = os.urandom(4096)
h.pwrite(buf, 6 << 20)
for _ in range(300):
    if dirty() == 0:
        break
    time.sleep(0.1)
else:
    sys.exit("FAIL: write-behind did not write the page back")
if stored(6 << 20, 4096) == buf:
    sys.exit("FAIL: write-behind wrote with FUA for an export whose "
             "clients have not FLUSHed for 6 s")
h.flush()
if stored(6 << 20, 4096) != buf:
    sys.exit("FAIL: after the FLUSH the stable store lacks the page")
h.shutdown()
PY
assert_alive
