#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A read-only export advertises READ_ONLY, serves the backing file's data,
# and refuses writes, trims and zeroes with EPERM even from a client that
# sends them anyway; the backing file is left untouched.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
need qemu-io cmp

# A backing file with known content.
head -c 16M /dev/urandom >"$T/ro.img"
cp "$T/ro.img" "$T/ro.orig"
add_export disk0 16M rw
add_export ro 16M ro "read-only disk"
start_wbd

for uri in "$(uri_unix ro)" "$(uri_tcp ro)"; do
	log "refusing writes over $uri"
	"$PYTHON" - "$uri" "$T/ro.orig" <<'PY' || fail "read-only export over $uri misbehaved (see above)"
import nbd, sys
uri, orig = sys.argv[1], sys.argv[2]
h = nbd.NBD()
h.set_strict_mode(0)          # let the requests reach the server
h.connect_uri(uri)
assert h.is_read_only(), "READ_ONLY flag not advertised"
want = open(orig, "rb").read(65536)
assert h.pread(65536, 0) == want, "read-only export does not serve the backing data"
attempts = [
    ("pwrite", lambda: h.pwrite(b"\x55" * 4096, 0)),
    ("pwrite+FUA", lambda: h.pwrite(b"\x55" * 4096, 8192, nbd.CMD_FLAG_FUA)),
    ("trim", lambda: h.trim(4096, 0)),
    ("zero", lambda: h.zero(4096, 0)),
    ("zero+NO_HOLE", lambda: h.zero(4096, 0, nbd.CMD_FLAG_NO_HOLE)),
]
bad = 0
for name, fn in attempts:
    try:
        fn()
        print("%s on the read-only export succeeded" % name)
        bad += 1
    except nbd.Error as e:
        if e.errno != "EPERM":     # libnbd gives the errno name
            print("%s: expected EPERM, got %s (%s)" % (name, e.errno, e.string))
            bad += 1
h.flush()                     # flushing a read-only export is harmless
assert h.pread(65536, 0) == want, "data changed after refused writes"
h.shutdown()
sys.exit(1 if bad else 0)
PY
done

# qemu-io, opening the export read-write, is refused or fails its write.
out=$(qemu-io -f raw -c 'write -P 0x55 0 4k' "$(uri_unix ro)" 2>&1) || true
grep -Eqi 'not permitted|permission denied|read-only|read only' <<<"$out" ||
	fail "qemu-io write to the read-only export: expected a permission error, got: $out"
out=$(qemu-io -r -f raw -c 'read 0 64k' "$(uri_unix ro)" 2>&1) ||
	fail "qemu-io -r read of the read-only export failed: $out"

# The read-write export next to it still takes writes.
qemu-io -f raw -c 'write -P 0x66 0 4k' -c 'read -P 0x66 0 4k' "$(uri_unix disk0)" \
	>"$T/rw.out" 2>&1 || fail "write to the read-write export failed: $(cat "$T/rw.out")"

stop_wbd
cmp "$T/ro.img" "$T/ro.orig" || fail "the read-only export's backing file changed"
