#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# TLS with X.509 certificates (tls.mode "on"): real clients over TLS —
# nbdinfo, nbdcopy in and out (cmp), qemu-img compare and qemu-io with a
# tls-creds-x509 object, fio's nbd engine over nbds:// with verification; a
# TLS-only export (tls = "require") refused to a plain client with
# NBD_REP_ERR_TLS_REQD and left out of its LIST, served over TLS; a
# certificate rotated by reload (a client trusting only the new CA gets in
# after it), and a broken new key rejected with the old one kept.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
source "$SRCDIR/lib-tls.sh"
need nbdinfo nbdcopy qemu-img qemu-io fio
need_python_nbd

make_ca "$T/ca" "wbd test CA"
make_server_cert "$T/ca" "$T/pki"
make_client_cert "$T/ca" "$T/client" client1.example.org

add_export disk0 32M rw
write_config
# A TLS-only export, and TLS offered.
sed -i 's|^);$|, { name = "secret"; backing = "'"$T"'/secret.img"; size = "8M"; tls = "require"; }\n);|' "$CONF"
echo "tls = { mode = \"on\"; certificates = \"$T/pki\"; };" >>"$CONF"
start_wbd
CTLSOCK=${SOCK%/*}/control.sock

tls_uri() { printf 'nbds://127.0.0.1:%s/%s?tls-certificates=%s' "$PORT" "$1" "${2:-$T/client}"; }

# nbdinfo over TLS.
nbdinfo "$(tls_uri disk0)" >"$T/info" 2>&1 || { cat "$T/info"; fail "nbdinfo over TLS failed"; }
grep -q 'with TLS' "$T/info" || fail "nbdinfo did not negotiate TLS: $(head -1 "$T/info")"

# nbdcopy in and out.
head -c 32M /dev/urandom >"$T/src.img"
nbdcopy "$T/src.img" "$(tls_uri disk0)" || fail "nbdcopy to wbd over TLS failed"
nbdcopy "$(tls_uri disk0)" "$T/back.img" || fail "nbdcopy from wbd over TLS failed"
cmp "$T/src.img" "$T/back.img" || fail "data read back over TLS differs"

# qemu-img and qemu-io with a TLS credentials object.
QOBJ="tls-creds-x509,id=tls0,endpoint=client,dir=$T/client"
QNBD="driver=nbd,server.type=inet,server.host=127.0.0.1,server.port=$PORT,tls-creds=tls0"
qemu-img compare --object "$QOBJ" --image-opts "driver=file,filename=$T/src.img" \
	"$QNBD,export=disk0" >"$T/cmp" 2>&1 || { cat "$T/cmp"; fail "qemu-img compare over TLS failed"; }
qemu-io --object "$QOBJ" --image-opts "$QNBD,export=disk0" \
	-c "write -P 0x5a 1M 1M" -c "read -P 0x5a 1M 1M" -c flush >"$T/qio" 2>&1 ||
	{ cat "$T/qio"; fail "qemu-io over TLS failed"; }
grep -qi 'pattern verification failed\|error' "$T/qio" && { cat "$T/qio"; fail "qemu-io read back wrong data over TLS"; }

# fio's nbd engine: libnbd finds the certificates in $HOME/.pki/libnbd.
mkdir -p "$T/home/.pki"
cp -r "$T/client" "$T/home/.pki/libnbd"
HOME=$T/home fio --name=tls --ioengine=nbd --uri="nbds://127.0.0.1:$PORT/disk0" \
	--rw=randwrite --bs=4k --size=8M --iodepth=16 --verify=crc32c \
	--do_verify=1 --output="$T/fio.out" >"$T/fio.err" 2>&1 ||
	{ cat "$T/fio.out" "$T/fio.err"; tail -20 "$LOG"; fail "fio over nbds:// failed"; }
grep -q 'err= 0' "$T/fio.out" || { cat "$T/fio.out"; fail "fio reported errors"; }

# The TLS-only export: refused in the clear, served over TLS.
"$PYTHON" - "$PORT" <<'PY' || fail "see above"
import socket, struct, sys
port = int(sys.argv[1])
OPT_MAGIC, REP_MAGIC = 0x49484156454F5054, 0x0003E889045565A9
OPT_LIST, OPT_INFO = 3, 6
REP_ACK, REP_SERVER, REP_ERR_TLS_REQD = 1, 2, 0x80000005
def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            sys.exit("FAIL: server closed the connection")
        b += c
    return b
s = socket.create_connection(("127.0.0.1", port), timeout=10)
recv_exact(s, 18)
s.sendall(struct.pack(">I", 3))
def opt(o, data=b""):
    s.sendall(struct.pack(">QII", OPT_MAGIC, o, len(data)) + data)
    replies = []
    while True:
        magic, ro, rtype, rlen = struct.unpack(">QIII", recv_exact(s, 20))
        body = recv_exact(s, rlen)
        if magic != REP_MAGIC or ro != o:
            sys.exit("FAIL: bad option reply")
        replies.append((rtype, body))
        if rtype == REP_ACK or rtype & 0x80000000:
            return replies
def info(name):
    return struct.pack(">I", len(name)) + name + struct.pack(">H", 0)
r = opt(OPT_INFO, info(b"secret"))
if r[-1][0] != REP_ERR_TLS_REQD:
    sys.exit("FAIL: INFO of a TLS-only export in the clear got 0x%x, not TLS_REQD" % r[-1][0])
if opt(OPT_INFO, info(b"disk0"))[-1][0] != REP_ACK:
    sys.exit("FAIL: INFO of an optional-TLS export in the clear was refused")
names = [b[4:4 + struct.unpack(">I", b[:4])[0]] for t, b in opt(OPT_LIST) if t == REP_SERVER]
if names != [b"disk0"]:
    sys.exit("FAIL: LIST in the clear shows %r, not only disk0" % names)
print("plain client: TLS-only export refused with TLS_REQD and not listed")
PY
nbdinfo "nbd://127.0.0.1:$PORT/secret" >/dev/null 2>&1 && fail "a plain client opened the TLS-only export"
nbdinfo "$(tls_uri secret)" >/dev/null 2>&1 || fail "the TLS-only export refused a TLS client"

# Rotation: a new CA and server certificate, installed by reload.
make_ca "$T/ca2" "wbd test CA 2"
make_server_cert "$T/ca2" "$T/pki2"
make_client_cert "$T/ca2" "$T/client2" client2.example.org
nbdinfo "$(tls_uri disk0 "$T/client2")" >/dev/null 2>&1 &&
	fail "a client trusting only the new CA got in before the rotation"
cp "$T/pki2/ca-cert.pem" "$T/pki2/server-cert.pem" "$T/pki2/server-key.pem" "$T/pki/"
"$WBCTL" -s "$CTLSOCK" reload >"$T/reload" 2>&1 || { cat "$T/reload"; fail "reload after rotating the certificate failed"; }
nbdinfo "$(tls_uri disk0 "$T/client2")" >/dev/null 2>&1 ||
	fail "the rotated certificate is not served after reload"

# A broken new key: the reload is rejected, the running certificate stays.
echo "not a key" >"$T/pki/server-key.pem"
if "$WBCTL" -s "$CTLSOCK" reload >"$T/reload" 2>&1; then
	fail "reload with a broken server key succeeded"
fi
grep -q 'server-key.pem' "$T/reload" || { cat "$T/reload"; fail "the rejected reload does not name the key"; }
nbdinfo "$(tls_uri disk0 "$T/client2")" >/dev/null 2>&1 ||
	fail "the running certificate was lost with the rejected reload"
assert_alive
stop_wbd
check_logs_clean || exit 1
