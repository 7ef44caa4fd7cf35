#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# On a multi-conn remote a read may go on another connection than the
# writes before it (the read connection, or another of libnbd's), and NBD
# multi-conn promises that it sees a completed write only once a FLUSH has
# covered it.  wbd keeps the ranges written to such a remote that no FLUSH
# has covered yet: a cache miss in one of them is preceded by a FLUSH, a
# miss elsewhere is not; and writeback flushes what it wrote soon after
# (a commit), so that misses seldom wait for one.  The remote is nbdkit
# memory behind its log filter.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl

KLOG=$T/kit-requests.log
start_nbdkit kit --filter=log memory 64M logfile="$KLOG"
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")"
# Periodic writeback after half a second.
write_cache_config 64M 'dirty_expire_centisecs = 50; dirty_writeback_centisecs = 20;'
start_wbd

# pyio OP OFFSET [LEN]: write 64 KiB of 0xab at OFFSET, trim 64 KiB there,
# or read LEN there (checking what the writes and the trim left).
pyio() {
	"$PYTHON" - "$(uri_unix disk0)" "$@" <<'PY'
import nbd, sys
uri, op, off = sys.argv[1], sys.argv[2], int(sys.argv[3])
h = nbd.NBD()
h.connect_uri(uri)
if op == "write":
    h.pwrite(b"\xab" * 65536, off)
elif op == "trim":
    h.trim(65536, off)
else:
    data = h.pread(int(sys.argv[4]), off)
    want = 0xab if off < 65536 else 0
    if data != bytes([want]) * len(data):
        sys.exit("FAIL: the read at %d does not hold what was written" % off)
h.shutdown()
PY
}

# The remote's requests from LINE on, one word each.
requests_since() {
	tail -n +"$1" "$KLOG" | awk '/ (Write|Trim|Flush|Read) id=/ {
		for (i = 1; i <= NF; i++) if ($i ~ /^(Write|Trim|Flush|Read)$/) print $i }'
}

# 1. Writeback commits: a FLUSH follows the periodic writeback by itself.
pyio write 0 || fail "the write"
wait_clean 10
for ((i = 0; i < 50; i++)); do
	[[ $(requests_since 1 | tr '\n' ' ') == *"Write "*"Flush"* ]] && break
	sleep 0.1
done
seen=$(requests_since 1 | tr '\n' ' ')
[[ $seen == *"Write "*"Flush"* ]] ||
	fail "no FLUSH after the writeback within 5 s (saw: $seen)"
log "writeback, then its commit: $seen"

[[ $(remote_field flush_before_read) == True ]] || fail "flush_before_read is not true"
(($(remote_field commits) >= 1)) || fail "wbctl status counts no commit"
[[ $(remote_field unflushed_ranges_max) == 1024 && $(remote_field commit_interval_ms) == 50 ]] ||
	fail "the settings in wbctl status are not the defaults"
# Everything committed (a second run may have been, by the next
# periodic pass) before the TRIM.
for ((i = 0; i < 50; i++)); do
	(($(remote_field unflushed_ranges) == 0)) && break
	sleep 0.1
done
(($(remote_field unflushed_ranges) == 0)) ||
	fail "$(remote_field unflushed_ranges) ranges still unflushed 5 s after the writeback"

# 2. A TRIM reaches the remote and is not flushed by anyone: its range
# is unflushed, and the cache's pages of it are gone.
mark=$(($(wc -l <"$KLOG") + 1))
pyio trim $((1 << 20)) || fail "the trim"
seen=$(requests_since "$mark" | tr '\n' ' ')
[[ $seen == "Trim " ]] || fail "the remote did not see the TRIM alone (saw: $seen)"
(($(remote_field unflushed_ranges) == 1)) ||
	fail "wbctl status shows $(remote_field unflushed_ranges) unflushed ranges after the TRIM, not 1"

# A miss elsewhere needs no FLUSH.
mark=$(($(wc -l <"$KLOG") + 1))
pyio read $((8 << 20)) 4096 || fail "the miss elsewhere"
seen=$(requests_since "$mark" | tr '\n' ' ')
[[ $seen == "Read " ]] ||
	fail "a miss outside every unflushed range was not a READ alone (saw: $seen)"

# A miss in the trimmed range: a FLUSH covering the TRIM first.
mark=$(($(wc -l <"$KLOG") + 1))
pyio read $((1 << 20)) 4096 || fail "the miss in the trimmed range"
seen=$(requests_since "$mark" | tr '\n' ' ')
log "a miss in the trimmed range: $seen"
[[ $seen == "Flush Read "* ]] ||
	fail "the miss was not preceded by a FLUSH covering the TRIM (saw: $seen)"
(($(remote_field flushes_before_read) == 1 && $(remote_field unflushed_ranges) == 0)) ||
	fail "wbctl status: $(remote_field flushes_before_read) misses flushed first, $(remote_field unflushed_ranges) ranges left (want 1 and 0)"

# Covered now: another miss in that range sends no FLUSH of its own.
mark=$(($(wc -l <"$KLOG") + 1))
pyio read $(((1 << 20) + 32768)) 4096 || fail "the second miss"
seen=$(requests_since "$mark" | tr '\n' ' ')
[[ $seen == *Flush* ]] && fail "a FLUSH before a miss whose range a FLUSH covered (saw: $seen)"
[[ $seen == *Read* ]] || fail "the second miss did not reach the remote (saw: $seen)"
log "the same range again, flushed since: no FLUSH ($seen)"
assert_alive
