#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# An export removed from the config by a reload takes no new connections;
# once written back and idle it is gone: wbctl exports and wbctl status no
# longer list it, and wbctl flush (of everything) no longer names it.  Its
# dirty data reaches the backing file first.
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"
need_python_nbd

add_export disk0 16M rw
add_export disk9 4M rw
write_cache_config 64M 'dirty_writeback_centisecs = 0;'
start_wbd

"$PYTHON" - "$(uri_unix disk9)" "$T/data" <<'PY' || fail "the writer failed"
import nbd, os, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = os.urandom(1 << 20)
h.pwrite(data, 0)
open(sys.argv[2], "wb").write(data)
h.shutdown()
PY

sed -i '/name = "disk9"/d' "$CONF"
sed -i 's|^\(  { name = "disk0".*}\),$|\1|' "$CONF"
"$WBD" -n -c "$CONF" >/dev/null || fail "the test's new config is bad: $(cat "$CONF")"
expect_exit 0 wbctl reload
log "reload: $OUT"
assert_match 'disk9.*removed' "$OUT" "reload names the removed export"
nbdinfo "$(uri_unix disk9)" >/dev/null 2>&1 && fail "a removed export still takes new connections"

for ((i = 0; i < 100; i++)); do
	cmp -s -n $((1 << 20)) "$T/data" "$T/disk9.img" && break
	sleep 0.1
done
cmp -s -n $((1 << 20)) "$T/data" "$T/disk9.img" ||
	fail "the removed export's dirty data was not written back"
for ((i = 0; i < 100; i++)); do
	wbctl exports | grep -q '^disk9 ' || break
	sleep 0.1
done
expect_exit 0 wbctl exports
grep -q '^disk9 ' <<<"$OUT" && fail "10 s after the reload, wbctl exports still lists the removed disk9: $OUT"
expect_exit 0 wbctl --json status
grep -q '"disk9"' "$T/out" && fail "wbctl status still shows the removed disk9"
expect_exit 0 wbctl flush
[[ $OUT == "flushed disk0" ]] || fail "wbctl flush of everything: $OUT"
assert_alive
