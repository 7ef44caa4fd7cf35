#!/usr/bin/env bash
# On a multi-conn remote a read may go on another connection than the
# writes before it (the read connection, or another of libnbd's), and NBD
# multi-conn promises that it sees a completed write only once a FLUSH has
# covered it.  So a cache miss after writeback that no FLUSH has covered
# yet is preceded by one: the remote (nbdkit memory behind its log filter)
# sees Write, then Flush, then the Read.  A second miss with nothing
# written back since sends no FLUSH of its own.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl

KLOG=$T/kit-requests.log
start_nbdkit kit --filter=log memory 64M logfile="$KLOG"
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")"
# Periodic writeback after half a second: written back without a FLUSH.
write_cache_config 64M 'dirty_expire_centisecs = 50; dirty_writeback_centisecs = 20;'
start_wbd

# pyio OP OFFSET [LEN]: write 64 KiB of 0xab at OFFSET, or read LEN there.
pyio() {
	"$PYTHON" - "$(uri_unix disk0)" "$@" <<'PY'
import nbd, sys
uri, op, off = sys.argv[1], sys.argv[2], int(sys.argv[3])
h = nbd.NBD()
h.connect_uri(uri)
if op == "write":
    h.pwrite(b"\xab" * 65536, off)
else:
    data = h.pread(int(sys.argv[4]), off)
    if off == 0 and data != b"\xab" * len(data):
        sys.exit("FAIL: the data written back does not read back")
h.shutdown()
PY
}

# The remote's requests from LINE on, one word each: Write, Flush, Read.
requests_since() {
	tail -n +"$1" "$KLOG" | awk '/ (Write|Flush|Read) id=/ {
		for (i = 1; i <= NF; i++) if ($i ~ /^(Write|Flush|Read)$/) print $i }'
}

pyio write 0 || fail "the write"
# Until it has been written back (by periodic writeback, with no FLUSH).
for ((i = 0; i < 100; i++)); do
	dirty=$(remote_wbctl status --json | "$PYTHON" -c 'import json, sys
print(json.load(sys.stdin)["cache"]["dirty_bytes"])')
	((dirty == 0)) && break
	sleep 0.1
done
((dirty == 0)) || fail "still $dirty bytes dirty after 10 s"
grep -q ' Write id=' "$KLOG" || fail "the remote saw no write"
grep -q ' Flush id=' "$KLOG" && fail "a FLUSH before any read: nothing to check"
mark=$(($(wc -l <"$KLOG") + 1))

# A miss (8 MiB on: never written, not cached).
pyio read $((8 << 20)) 4096 || fail "the first miss"
seen=$(requests_since "$mark" | tr '\n' ' ')
log "the remote saw, after the writeback: $seen"
[[ $seen == "Flush Read "* ]] ||
	fail "the miss was not preceded by a FLUSH covering the writeback (saw: $seen)"

# Nothing written back since: the next miss has no FLUSH of its own.
mark=$(($(wc -l <"$KLOG") + 1))
pyio read $((16 << 20)) 4096 || fail "the second miss"
seen=$(requests_since "$mark" | tr '\n' ' ')
[[ $seen == *Flush* ]] && fail "a FLUSH before a miss with nothing written back since (saw: $seen)"
[[ $seen == *Read* ]] || fail "the second miss did not reach the remote (saw: $seen)"
log "a second miss, nothing written back since: no FLUSH ($seen)"
assert_alive
