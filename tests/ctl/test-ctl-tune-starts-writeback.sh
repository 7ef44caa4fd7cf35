#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A tune takes effect at once: with periodic writeback off and 4M dirty
# under a 16M background threshold, nothing reaches the backing file; after
# "wbctl tune dirty_background_bytes=1M" background writeback starts and
# brings dirty data down to 1M -- without any FLUSH.  wbctl status shows the
# dirty bytes before and after.
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"
need_python_nbd

add_export_mode disk0 32M writeback
write_cache_config 32M 'dirty_background_bytes = "16M"; dirty_bytes = "24M"; dirty_writeback_centisecs = 0;'
start_wbd

# Write 4M and keep the connection open (no FLUSH, no disconnect).
mkfifo "$T/go"
"$PYTHON" - "$(uri_unix disk0)" "$T/go" "$T/written" <<'PY' &
import nbd, os, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = os.urandom(4 << 20)
h.pwrite(data, 0)
open(sys.argv[3], "wb").write(data)
open(sys.argv[2]).read()          # wait until the test is done
h.shutdown()
PY
writer=$!
_PIDS+=("$writer")
for ((i = 0; i < 100; i++)); do
	[[ -s $T/written ]] && break
	sleep 0.1
done
[[ -s $T/written ]] || fail "the writer did not write"

dirty_bytes() {
	wbctl --json status | "$SYSPY" -c 'import json, sys; print(json.load(sys.stdin)["exports"][0]["dirty_bytes"])'
}
backing_has_data() {
	"$SYSPY" - "$T/disk0.img" <<'PY'
import sys
d = open(sys.argv[1], "rb").read(4 << 20)
sys.exit(0 if d.count(0) < len(d) // 2 else 1)
PY
}

sleep 2
[[ $(dirty_bytes) == $((4 << 20)) ]] || fail "expected 4M dirty, status says $(dirty_bytes)"
expect_exit 0 wbctl status
assert_match '^  disk0 +32\.0 MiB +writeback +4\.0 MiB +4\.0 MiB ' "$OUT" "status with 4M dirty"
backing_has_data && fail "data reached the backing file below the background threshold"

expect_exit 0 wbctl tune dirty_background_bytes=1M
grep -q "^dirty_background_bytes = 1048576" <<<"$OUT" || fail "tune printed: $OUT"
for ((i = 0; i < 150; i++)); do
	d=$(dirty_bytes)
	((d <= 1 << 20)) && break
	sleep 0.1
done
((d <= 1 << 20)) || fail "15 s after lowering dirty_background_bytes to 1M, $d bytes are still dirty"
backing_has_data || fail "dirty data went down but the backing file has no data"
log "background writeback after the tune: $d bytes dirty"
expect_exit 0 wbctl status
assert_match '^  dirty_background +1\.0 MiB$' "$OUT" "status shows the new threshold"

echo >"$T/go"
wait "$writer" || fail "the writer failed"
assert_alive
