#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# default_export chooses what the empty export name reaches:
#  1. default_export = "b": nbdinfo nbd://127.0.0.1:PORT (NBD_OPT_GO with
#     "") and NBD_OPT_EXPORT_NAME "" both get export b;
#  2. after a reload with default_export = "none": GO "" gets
#     NBD_REP_ERR_UNKNOWN, EXPORT_NAME "" a
#     disconnect, and exports named are still served;
#  3. after a reload without the key: the first export, a;
#  4. wbd -n names the line of a default_export that is no export.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
need nbdinfo

add_export a 4M rw "first"
add_export b 8M rw "second"
write_config
echo 'default_export = "b";' >>"$CONF"
start_wbd

# size_of_default OPTION: the size the empty name gets with NBD_OPT_GO (go)
# or NBD_OPT_EXPORT_NAME (export-name), "refused" or "disconnected".
size_of_default() {
	"$PYTHON" - "$SRCDIR" "$SOCK" "$1" <<'PY'
import struct, sys
sys.path.insert(0, sys.argv[1])
from nbdraw import Raw, Disconnected, REP_ACK, REP_ERR, INFO_EXPORT
class Args:
    unix = sys.argv[2]
c = Raw(Args)
c.greeting()
if sys.argv[3] == "go":
    rtype, infos = c.go("")
    if rtype != REP_ACK:
        print("refused %x" % rtype)
    else:
        print(struct.unpack(">HQH", infos[INFO_EXPORT])[1])
else:
    c.send_option(1, b"")
    try:
        print(struct.unpack(">QH", c.recv_exact(10))[0])
    except (Disconnected, ConnectionResetError):
        print("disconnected")
PY
}

log "1. default_export = \"b\""
info=$(nbdinfo "nbd://127.0.0.1:$PORT") || fail "nbdinfo nbd://127.0.0.1:$PORT failed"
grep -q 'export-size: 8388608' <<<"$info" || fail "the empty name did not reach b: $info"
[[ $(size_of_default go) == 8388608 ]] || fail "GO \"\": $(size_of_default go)"
[[ $(size_of_default export-name) == 8388608 ]] || fail "EXPORT_NAME \"\": $(size_of_default export-name)"
if reason=$(kernel_nbd_unusable); then
	log "kernel nbd-client pass skipped: $reason"
else
	log "the kernel's client, without -N, on /dev/nbd0"
	nbd-client 127.0.0.1 "$PORT" /dev/nbd0 >"$T/nbd-client.log" 2>&1 ||
		fail "nbd-client could not connect: $(cat "$T/nbd-client.log")"
	ksize=$(blockdev --getsize64 /dev/nbd0 || echo "?")
	nbd-client -d /dev/nbd0 >/dev/null 2>&1 || true
	[[ $ksize == 8388608 ]] || fail "/dev/nbd0 is $ksize bytes, not export b's 8 MiB"
fi

log "2. default_export = \"none\""
sed -i 's/^default_export = .*/default_export = "none";/' "$CONF"
"$WBCTL" -s "$T/control.sock" reload >"$T/reload.out" || fail "wbctl reload: $(cat "$T/reload.out")"
grep -q 'default_export "none"' "$T/reload.out" || fail "the reload did not say so: $(cat "$T/reload.out")"
if nbdinfo "nbd://127.0.0.1:$PORT" >"$T/nbdinfo.out" 2>&1; then
	fail "the empty name still reaches an export: $(cat "$T/nbdinfo.out")"
fi
[[ $(size_of_default go) == "refused 80000006" ]] || fail "GO \"\": $(size_of_default go)"
[[ $(size_of_default export-name) == disconnected ]] || fail "EXPORT_NAME \"\": $(size_of_default export-name)"
nbdinfo "$(uri_tcp a)" >/dev/null || fail "export a by name is no longer served"
nbdinfo "$(uri_unix b)" >/dev/null || fail "export b by name is no longer served"

log "3. left out: the first export"
sed -i '/^default_export = /d' "$CONF"
"$WBCTL" -s "$T/control.sock" reload >"$T/reload.out" || fail "wbctl reload: $(cat "$T/reload.out")"
grep -q 'export-size: 4194304' <<<"$(nbdinfo "nbd://127.0.0.1:$PORT")" ||
	fail "the empty name does not reach the first export"
[[ $(size_of_default export-name) == 4194304 ]] || fail "EXPORT_NAME \"\": $(size_of_default export-name)"

log "4. wbd -n: a default_export that is no export"
cp "$CONF" "$T/bad.conf"
echo 'default_export = "disk9";' >>"$T/bad.conf"
line=$(wc -l <"$T/bad.conf")
if "$WBD" -n -c "$T/bad.conf" >"$T/check.out" 2>&1; then
	fail "wbd -n accepted default_export = \"disk9\""
fi
grep -q "bad.conf:$line: default_export: expected the name of an export" "$T/check.out" ||
	fail "wbd -n said: $(cat "$T/check.out")"
assert_alive
