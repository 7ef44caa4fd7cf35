#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Reads from a remote are sized to its link, as writeback is: over a
# remote with 100 ms on every request (bench/net/delay-filter.c, nbdkit
# memory, multi-conn, its default 16 threads per connection, behind its
# log filter):
#  1. cold random 16 KiB reads, 256 at once from one client: more than the
#     old fixed 64 reach the remote together (the read window grows with
#     the reads' bandwidth x round trip), over more than two of the
#     remote's connections (past the read connection's share, reads go
#     to the least busy: nbdkit serves 16 of a connection's at a time);
#  2. a cold sequential reader at queue depth 1 with cache.readahead_bytes
#     = 1M: read-ahead grows past 1 MiB with the round trip (wbctl status
#     link.readahead_bytes), and goes out as several reads in flight
#     together (more than 3 at once at the remote).
# Every read returns the remote's data.  Counts only, no timings.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl
need_delay_filter

KLOG=$T/kit-requests.log
start_nbdkit kit --filter=log --filter="$T/netdelay.so" \
	memory 160M rtt=100ms logfile="$KLOG"
KIT=$KIT_SOCK
head -c 160M /dev/urandom >"$T/data"
"$PYTHON" -c 'import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
d = open(sys.argv[2], "rb").read()
for o in range(0, len(d), 16 << 20):
    h.aio_pwrite(d[o:o + (16 << 20)], o)
while h.aio_in_flight() > 0:
    h.poll(-1)
h.flush(); h.shutdown()' "$(kit_uri "$KIT")" "$T/data"

add_remote_export disk0 "$(kit_uri "$KIT")"
write_cache_config 256M 'dirty_background_ratio = 50; dirty_ratio = 80; dirty_writeback_centisecs = 0;'
sed -i 's/^cache = { size = "256M"; page_size = "4K"; };/cache = { size = "256M"; page_size = "4K"; readahead_bytes = "1M"; };/' "$CONF"
grep -q 'readahead_bytes = "1M"' "$CONF" || fail "could not set read-ahead in $CONF"
add_remote_settings 'io_timeout_ms = 120000;'
start_wbd

# most_reads FROM_BYTE: the most Reads in flight at once at the remote,
# from its log (a request's line when it arrives, "...Read" when done).
most_reads() {
	"$PYTHON" - "$KLOG" "$1" <<'PY'
import re, sys
with open(sys.argv[1]) as f:
    f.seek(int(sys.argv[2]))
    text = f.read()
n = most = 0
for line in text.splitlines():
    if re.search(r"connection=\d+ Read id=", line):
        n += 1
        most = max(most, n)
    elif re.search(r"connection=\d+ \.\.\.Read id=", line):
        n -= 1
print(most)
PY
}

# 1. 256 random cold reads at once, 6144 in all, over the first 96 MiB:
# long enough for the window to grow and the remote's connections to be
# added (2048 reads over 32 MiB had at most 61-89 at once at the remote,
# too near the 64 to tell).
mark=$(stat -c %s "$KLOG")
"$PYTHON" - "$(uri_unix disk0)" "$T/data" <<'PY' || fail "the random reads failed"
import nbd, random, sys
uri, path = sys.argv[1:3]
data = open(path, "rb").read()
h = nbd.NBD()
h.connect_uri(uri)
random.seed(27)
offs = [i * 16384 for i in range((96 << 20) // 16384)]
random.shuffle(offs)
pending = []
for o in offs:
    b = nbd.Buffer(16384)
    pending.append((h.aio_pread(b, o), b, o))
    while h.aio_in_flight() >= 256:
        h.poll(-1)
while h.aio_in_flight() > 0:
    h.poll(-1)
for c, b, o in pending:
    assert h.aio_command_completed(c)
    assert b.to_bytearray() == data[o:o + 16384], "wrong data at %d" % o
h.shutdown()
PY
most=$(most_reads "$mark")
log "random cold reads: at most $most in flight at the remote"
((most > 64)) || fail "at most $most cache misses reached the remote together: the read window stayed at 64"
window=$(link_field window_reads)
log "read window: $window reads; round trip $(link_field read_round_trip_us) us"
((window > 64)) || fail "wbctl status shows a read window of $window reads"
conns=$("$PYTHON" - "$KLOG" "$mark" <<'PY'
import re, sys
with open(sys.argv[1]) as f:
    f.seek(int(sys.argv[2]))
    print(len(set(re.findall(r"connection=(\d+) Read id=", f.read()))))
PY
)
log "random cold reads went over $conns connection(s)"
((conns > 2)) || fail "the cache misses went over $conns connection(s) of a multi-conn remote"

# 2. A sequential reader, 256 KiB at a time, over the next 64 MiB.
mark=$(stat -c %s "$KLOG")
"$PYTHON" - "$(uri_unix disk0)" "$T/data" <<'PY' || fail "the sequential reads failed"
import nbd, sys
uri, path = sys.argv[1:3]
data = open(path, "rb").read()
h = nbd.NBD()
h.connect_uri(uri)
for o in range(96 << 20, 160 << 20, 256 << 10):
    assert h.pread(256 << 10, o) == data[o:o + (256 << 10)], "wrong data at %d" % o
h.shutdown()
PY
most=$(most_reads "$mark")
ra=$(link_field readahead_bytes)
log "sequential reads: at most $most in flight at the remote; read-ahead $ra bytes"
((most > 3)) || fail "read-ahead kept at most $most reads in flight at the remote"
((ra > 1 << 20)) || fail "read-ahead stayed at $ra bytes over a 100 ms round trip"
assert_alive
