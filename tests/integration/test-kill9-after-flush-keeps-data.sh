#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# kill -9 right after a FLUSH reply loses nothing that was acknowledged
# before the FLUSH: three rounds, each on a fresh daemon over the backing
# file the previous round left, write random data at random offsets (in
# writeback mode, periodic writeback off, so it all sits dirty in the
# cache), FLUSH, SIGKILL the daemon the instant the reply arrives, then
# compare every byte written before the FLUSH with a shadow copy.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export_mode disk0 16M writeback
write_cache_config 32M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'

for round in 1 2 3; do
	log "round $round"
	start_wbd
	"$PYTHON" - "$(uri_unix disk0)" "$T/disk0.img" "$WBD_PID" "$round" <<'PY' ||
import nbd, os, random, signal, sys
uri, backing, pid, rnd = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
size = 16 << 20
seed = int.from_bytes(os.urandom(4), "little")
print("round %d: random seed %d" % (rnd, seed))
rng = random.Random(seed)

h = nbd.NBD()
h.connect_uri(uri)
h2 = nbd.NBD()                  # a second connection writes too (multi-conn)
h2.connect_uri(uri)
shadow = bytearray(size)
written = bytearray(size)       # 1 where a byte was written before FLUSH
for i in range(300):
    n = rng.choice([1, 512, 4096, rng.randrange(1, 65536), rng.randrange(1, 300000)])
    off = rng.randrange(size - n)
    buf = os.urandom(n)
    (h if i % 3 else h2).pwrite(buf, off)
    shadow[off:off + n] = buf
    written[off:off + n] = b"\1" * n
h.flush()
os.kill(pid, signal.SIGKILL)

with open(backing, "rb") as f:
    data = f.read()
bad = [p for p in range(size) if written[p] and data[p] != shadow[p]] \
    if data != shadow else []
if bad:
    sys.exit("FAIL: round %d (seed %d): %d bytes acknowledged before FLUSH are "
             "not on the backing file after kill -9 (first at offset %d)"
             % (rnd, seed, len(bad), bad[0]))
PY
		fail "round $round: see above"
	wait_exit "$WBD_PID" 10 || fail "wbd still running after SIGKILL"
	[[ $EXIT_STATUS == 137 ]] || fail "wbd exited with $EXIT_STATUS, not by SIGKILL"
done
