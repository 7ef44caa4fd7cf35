#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# When writeback fails, wbctl flush says so on one line and exits 1; the
# data stays dirty, wbctl status counts the errors and shows the last one,
# and the daemon keeps serving; once there is room, a flush succeeds.  The
# backing file is a sparse 8M file on a 1M tmpfs, so writing back 4M of
# data fails with ENOSPC.
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"
need_python_nbd
[[ $(id -u) == 0 ]] || skip "mounting a tmpfs needs root"

mkdir "$T/full"
mount -t tmpfs -o size=1M tmpfs "$T/full" 2>/dev/null || skip "cannot mount a tmpfs"
trap '_rc=$?; set +e; umount -l "$T/full" 2>/dev/null; (exit $_rc); _cleanup' EXIT
truncate -s 8M "$T/full/disk0.img"

add_export_mode disk0 8M writeback "$T/full/disk0.img"
write_cache_config 32M 'dirty_background_bytes = "16M"; dirty_bytes = "24M"; dirty_writeback_centisecs = 0;'
start_wbd

"$PYTHON" - "$(uri_unix disk0)" <<'PY' || fail "the writer failed"
import nbd, os, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(os.urandom(4 << 20), 0)
h.shutdown()
PY

expect_exit 1 wbctl flush disk0
# Progress lines ("... remaining") may come first; the error is one line.
assert_one_line "$(grep -v " remaining$" <<<"$ERR")" "flush that fails"
assert_match 'flush: .*(space|failed)' "$ERR" "flush that fails"
log "flush: $ERR"
expect_exit 1 wbctl --json flush disk0
check_schema error "$T/out"
assert_match '"code": "EIO"' "$OUT" "flush --json that fails"

expect_exit 0 wbctl --json status
"$SYSPY" - "$T/out" <<'PY' || fail "status after failed writeback: see above"
import json, sys
s = json.load(open(sys.argv[1]))
e, d = s["exports"][0], s["devices"][0]
assert e["dirty_bytes"] > 0, "the data that failed to write back is no longer dirty: %r" % e
assert e["writeback_errors"] > 0 or d["errors"] > 0, "no error counted: %r %r" % (e, d)
assert d["last_error"], "no last_error: %r" % d
PY
expect_exit 0 wbctl status
assert_match 'last error: ' "$OUT" "status shows the last error"
log "$(grep 'last error' <<<"$OUT")"
nbdinfo "$(uri_unix disk0)" >/dev/null || fail "the daemon no longer serves NBD"

# With room on the filesystem again, the retried flush succeeds.
mount -o remount,size=16M "$T/full" || fail "cannot grow the tmpfs"
expect_exit 0 wbctl flush disk0
expect_exit 0 wbctl --json status
"$SYSPY" -c 'import json, sys
e = json.load(open(sys.argv[1]))["exports"][0]
sys.exit(e["dirty_bytes"] != 0)' "$T/out" || fail "dirty data left after a successful flush"
assert_alive
