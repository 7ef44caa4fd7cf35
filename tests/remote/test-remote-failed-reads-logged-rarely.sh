#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Failed requests are answered with their error every time, but logged at
# most once a second on each I/O thread, with a count of those not
# logged: a remote whose every read fails (nbdkit's error filter), read
# thousands of times for 2.5 s through wbd, leaves a handful of lines in
# the log, not thousands, and the last of them counts the ones it left
# out.  wbd stays up and serves what it has cached.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd

truncate -s 64M "$T/remote.img"
start_nbdkit kit --filter=error file "$T/remote.img" \
	error-pread=EIO error-pread-rate=100%
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")"
write_cache_config 64M ''
start_wbd

start=$(date +%s)
"$PYTHON" - "$(uri_unix disk0)" <<'PY' || fail "see above"
import nbd, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
failed = 0
n = 0
end = time.monotonic() + 2.5
while n < 4000 or time.monotonic() < end:
    i = n
    n += 1
    try:
        h.pread(4096, (i % 16000) * 4096)
    except nbd.Error as e:
        if e.errno not in (None, 5, "EIO"):
            sys.exit("FAIL: a read failed with %s, not EIO" % e.errno)
        failed += 1
if failed != n:
    sys.exit("FAIL: %d of %d reads failed; every one should" % (failed, n))
print("%d reads, every one failed with EIO" % n)
# What wbd holds itself is still served.
h.pwrite(b"x" * 4096, 0)
if h.pread(4096, 0) != b"x" * 4096:
    sys.exit("FAIL: a cached page reads back wrong")
h.shutdown()
PY
secs=$(($(date +%s) - start + 1))
threads=$(getconf _NPROCESSORS_ONLN)
lines=$(grep -c 'READ of 4096 bytes at .* failed: Input/output error' "$LOG" || true)
((lines >= 1)) || fail "no failed READ logged"
max=$(((secs + 1) * threads))
((lines <= max)) ||
	fail "$lines lines for failed READs in $secs s (at most $max: one a second on each of $threads I/O threads)"
grep -Eq 'failed: Input/output error \([1-9][0-9]* other failed requests not logged\)' "$LOG" ||
	fail "no line counts the failed requests it left out"
log "failed READs for $secs s: $lines log lines (at most $max)"
assert_alive
