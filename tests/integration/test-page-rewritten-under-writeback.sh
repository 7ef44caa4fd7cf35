#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Pages written again while they are being written back (zero-copy
# writeback: the run points at the pages) over a slow backing file (every
# write delayed): WRITEs received into cache pages are copied into the pages
# under writeback rather than replacing them, and the new data wins —
# read back at once, after FLUSH, and on the backing file after exit.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
need cmp

start_slow_file "$T/slow" 16M 20ms
add_export_mode disk0 16M writeback "$SLOW_FILE"
write_cache_config 64M 'dirty_writeback_centisecs = 0;'
start_wbd

"$PYTHON" - "$(uri_unix disk0)" "$T" "$WBCTL" <<'PY' || fail "see above"
import json, os, random, subprocess, sys, threading, time
import nbd
uri, tdir, wbctl = sys.argv[1:4]
M, PS = 1 << 20, 4096
size = 16 * M
shadow = bytearray(size)

def status():
    out = subprocess.run([wbctl, "-s", tdir + "/control.sock", "status",
                          "--json"], check=True, capture_output=True).stdout
    return json.loads(out)["cache"]

def write(h, off, buf):
    h.pwrite(buf, off)
    shadow[off:off + len(buf)] = buf

h = nbd.NBD()
h.connect_uri(uri)
for off in range(0, 8 * M, M):
    write(h, off, os.urandom(M))

# Write it back (a FLUSH on another connection), and write it again
# meanwhile: whole pages and unaligned ones.
f = nbd.NBD()
f.connect_uri(uri)
flusher = threading.Thread(target=f.flush)
flusher.start()
deadline = time.time() + 60
while status()["writeback_bytes"] == 0:
    if time.time() > deadline or not flusher.is_alive():
        sys.exit("FAIL: writeback was never seen in progress")
    time.sleep(0.01)
during = 0
rng = random.Random(7)
for i in range(24):
    if i % 2:
        n = rng.randrange(PS, M)
        off = rng.randrange(8 * M - n)
    else:
        n, off = M, (i // 2 % 8) * M
    write(h, off, os.urandom(n))
    if status()["writeback_bytes"] > 0:
        during += 1
flusher.join()
print("%d of 24 rewrites ended with writeback still in progress" % during)
if during == 0:
    sys.exit("FAIL: no rewrite overlapped writeback")
if h.pread(size, 0) != shadow:
    sys.exit("FAIL: read back after the rewrites differs")
h.flush()
if h.pread(size, 0) != shadow:
    sys.exit("FAIL: read back after FLUSH differs")
h.shutdown()
f.shutdown()
with open(tdir + "/shadow.img", "wb") as out:
    out.write(shadow)
PY
cmp "$T/shadow.img" "$SLOW_FILE" ||
	fail "after FLUSH the backing file differs from the shadow copy"
stop_wbd
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with status $EXIT_STATUS"
cmp "$T/shadow.img" "$SLOW_FILE" ||
	fail "after exit the backing file differs from the shadow copy"
