#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A FLUSH that has at most remote.fua_max_runs runs to write (4 here),
# on a remote that offers FUA, with nothing else written and not yet
# flushed, sends those runs as writes with FUA and no NBD_CMD_FLUSH (one
# round trip instead of two); the data is then in the remote's stable
# store (flushed-only.py saves it only on a FLUSH or a FUA write).  A
# FLUSH with more runs, or one run while something else written (a
# WRITE_ZEROES) is not yet flushed, still sends its writes and a FLUSH.
# With write-behind, pages written back while nothing else is unflushed
# go with FUA too, at most fua_max_runs between two FLUSHes, and the
# FLUSH after them sends nothing.  nbdkit's log filter shows what reached
# the remote.
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
add_remote_settings 'write_behind = false; commit_interval_ms = 0; fua_max_runs = 4;'
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

def flush_runs(runs, fua, what):
    """Write RUNS ((data, offset) pairs, not touching), FLUSH: each must
    reach the remote as one write, all with FUA and no flush (FUA) or
    all plain and then one flush; then the stable store holds them."""
    for buf, off in runs:
        h.pwrite(buf, off)
    mark = os.path.getsize(klog)
    h.flush()
    lines = since(mark)
    writes = [l for l in lines if " Write id=" in l]
    flushes = [l for l in lines if " Flush id=" in l]
    if (len(writes) != len(runs) or
            any(("fua=1" in l) != fua for l in writes) or
            len(flushes) != (0 if fua else 1)):
        sys.exit("FAIL: a FLUSH of %s should send %d write(s) %s:\n%s"
                 % (what, len(runs),
                    "with FUA and no flush" if fua else "and a flush",
                    "\n".join(lines)))
    if any(stored(off, len(buf)) != buf for buf, off in runs):
        sys.exit("FAIL: after the FLUSH the remote's stable store does "
                 "not hold %s" % what)

# 1. One run (64 KiB, 16 pages touching), nothing else unflushed: one
#    write with FUA, no FLUSH, and the data is stable on the remote.
flush_runs([(os.urandom(65536), 1 << 20)], True, "one run")
# 2. Four runs (not touching), fua_max_runs: four writes with FUA, no
#    FLUSH.
flush_runs([(os.urandom(4096), i * (2 << 20)) for i in range(4)], True,
           "four runs (fua_max_runs)")
# 2b. Five runs, more than fua_max_runs: plain writes, then one FLUSH.
flush_runs([(os.urandom(4096), i * (2 << 20) + (1 << 20)) for i in range(5)],
           False, "five runs (more than fua_max_runs)")

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

# wbctl status counts the FLUSHes made with FUA (parts 1 and 2).
fua=$(remote_wbctl status --json | "$PYTHON" -c 'import json, sys
d = [d for d in json.load(sys.stdin)["devices"] if d["remote"]][0]
print(d["link"]["flushes_by_fua"])')
((fua == 2)) || fail "wbctl status counts $fua FLUSHes made with FUA, not 2"

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

def written_back():
    """Wait (at most 30 s) until nothing is dirty or in flight."""
    for _ in range(300):
        if dirty() == 0:
            return
        time.sleep(0.1)
    sys.exit("FAIL: write-behind did not write the page(s) back")

for i in range(3):
    buf = os.urandom(4096)
    off = (2 << 20) + i * (1 << 20)
    h.flush()  # nothing to do: a client that FLUSHes (5 s)
    h.pwrite(buf, off)
    written_back()
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

# Eight pages, not touching, written one after another by a client that
# FLUSHes, each written back alone before the next: write-behind sends at
# most fua_max_runs (4) of them with FUA between two FLUSHes, the rest
# plainly, and the FLUSH after them flushes; all are then in the stable
# store.
h.flush()
mark = os.path.getsize(klog)
eight = [(os.urandom(4096), (8 << 20) + i * (1 << 20)) for i in range(8)]
for buf, off in eight:
    h.pwrite(buf, off)
    written_back()
with open(klog) as f:
    f.seek(mark)
    lines = [l for l in f.read().splitlines() if " Write id=" in l]
nfua = len([l for l in lines if "fua=1" in l])
if nfua > 4:
    sys.exit("FAIL: write-behind wrote %d runs with FUA between two "
             "FLUSHes, fua_max_runs is 4:\n%s" % (nfua, "\n".join(lines)))
h.flush()
if any(stored(off, 4096) != buf for buf, off in eight):
    sys.exit("FAIL: after the FLUSH the stable store lacks a page")

# No FLUSH for more than 5 s: write-behind writes plainly (its remote is
# not asked for a sync per page), and the FLUSH then flushes.
time.sleep(6)
buf = os.urandom(4096)
h.pwrite(buf, 6 << 20)
written_back()
if stored(6 << 20, 4096) == buf:
    sys.exit("FAIL: write-behind wrote with FUA for an export whose "
             "clients have not FLUSHed for 6 s")
h.flush()
if stored(6 << 20, 4096) != buf:
    sys.exit("FAIL: after the FLUSH the stable store lacks the page")
h.shutdown()
PY
assert_alive
