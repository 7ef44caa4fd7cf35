#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# TLS that refuses: tls.mode "require" with a PSK file — the right key gets
# in, a wrong key or an unknown user does not, and a plain client gets
# NBD_REP_ERR_TLS_REQD for every option but STARTTLS and ABORT (checked on a
# raw socket) and a hang-up on EXPORT_NAME; then X.509 with verify_peer — a
# client certificate signed by the CA gets in, a client without one or with
# one signed by another CA does not.  The config checker refuses the
# combinations that cannot work, with FILE:LINE.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
source "$SRCDIR/lib-tls.sh"
need nbdinfo
need_python_nbd

make_psk "$T/keys.psk" alice
make_psk "$T/wrong.psk" alice
make_psk "$T/bob.psk" bob
add_export disk0 16M rw
write_config
cp "$CONF" "$T/base.conf"
echo "tls = { mode = \"require\"; psk_file = \"$T/keys.psk\"; };" >>"$CONF"
start_wbd

psk_uri() { printf 'nbds://%s@127.0.0.1:%s/disk0?tls-psk-file=%s' "$1" "$PORT" "$2"; }
nbdinfo "$(psk_uri alice "$T/keys.psk")" >"$T/info" 2>&1 || { cat "$T/info"; fail "the right PSK was refused"; }
grep -q 'with TLS' "$T/info" || fail "no TLS with the right PSK"
nbdinfo "$(psk_uri alice "$T/wrong.psk")" >/dev/null 2>&1 && fail "a wrong PSK got in"
nbdinfo "$(psk_uri bob "$T/bob.psk")" >/dev/null 2>&1 && fail "an unknown PSK user got in"
nbdinfo "nbd://127.0.0.1:$PORT/disk0" >/dev/null 2>&1 && fail "a plain client got in under tls.mode require"
grep -q 'PSK user alice' "$LOG" || fail "the log does not name the PSK user"

# A plain client, option by option.
"$PYTHON" - "$PORT" <<'PY' || fail "see above"
import socket, struct, sys
port = int(sys.argv[1])
OPT_MAGIC, REP_MAGIC = 0x49484156454F5054, 0x0003E889045565A9
EXPORT_NAME, ABORT, LIST, STARTTLS, INFO, GO, STRUCTURED = 1, 2, 3, 5, 6, 7, 8
REP_ACK, ERR_INVALID, ERR_TLS_REQD = 1, 0x80000003, 0x80000005
def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            return None
        b += c
    return b
def connect():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    recv_exact(s, 18)
    s.sendall(struct.pack(">I", 3))
    return s
def opt(s, o, data=b""):
    s.sendall(struct.pack(">QII", OPT_MAGIC, o, len(data)) + data)
    h = recv_exact(s, 20)
    if h is None:
        return None
    magic, ro, rtype, rlen = struct.unpack(">QIII", h)
    recv_exact(s, rlen)
    if magic != REP_MAGIC or ro != o:
        sys.exit("FAIL: bad option reply to %d" % o)
    return rtype
info = struct.pack(">I", 5) + b"disk0" + struct.pack(">H", 0)
s = connect()
for o, d in ((LIST, b""), (INFO, info), (GO, info), (STRUCTURED, b""), (4242, b"")):
    t = opt(s, o, d)
    if t != ERR_TLS_REQD:
        sys.exit("FAIL: option %d before TLS got %r, not TLS_REQD" % (o, t))
t = opt(s, STARTTLS, b"x")
if t != ERR_INVALID:
    sys.exit("FAIL: STARTTLS with data got %r, not INVALID" % t)
if opt(s, ABORT) != REP_ACK:
    sys.exit("FAIL: ABORT before TLS was not acknowledged")
s = connect()
s.sendall(struct.pack(">QII", OPT_MAGIC, EXPORT_NAME, 5) + b"disk0")
if recv_exact(s, 1) is not None:
    sys.exit("FAIL: EXPORT_NAME before TLS was not answered by a hang-up")
print("plain client: TLS_REQD for every option, hang-up on EXPORT_NAME")
PY
assert_alive
stop_wbd

# verify_peer: only clients with a certificate from the CA.
make_ca "$T/ca" "wbd test CA"
make_server_cert "$T/ca" "$T/pki"
make_client_cert "$T/ca" "$T/client" client1.example.org
make_ca "$T/other" "another CA"
make_client_cert "$T/other" "$T/stranger" stranger.example.org
cp "$T/ca/ca-cert.pem" "$T/stranger/ca-cert.pem"        # trusts the server
mkdir -p "$T/nocert" && cp "$T/ca/ca-cert.pem" "$T/nocert/"
cp "$T/base.conf" "$CONF"
echo "tls = { mode = \"require\"; certificates = \"$T/pki\"; verify_peer = true; };" >>"$CONF"
start_wbd
cert_uri() { printf 'nbds://127.0.0.1:%s/disk0?tls-certificates=%s' "$PORT" "$1"; }
nbdinfo "$(cert_uri "$T/client")" >/dev/null 2>&1 || fail "a client with a certificate from the CA was refused"
grep -q 'certificate CN client1.example.org' "$LOG" || fail "the log does not name the client certificate's CN"
nbdinfo "$(cert_uri "$T/nocert")" >/dev/null 2>&1 && fail "a client without a certificate got in"
nbdinfo "$(cert_uri "$T/stranger")" >/dev/null 2>&1 && fail "a client certificate from another CA got in"
grep -q 'TLS handshake failed' "$LOG" || fail "refused handshakes are not logged"
assert_alive
stop_wbd
check_logs_clean || exit 1

# The checker: combinations that cannot work, each with FILE:LINE.
check() {
	local want=$1 extra=$2
	cp "$T/base.conf" "$T/bad.conf"
	printf '%s\n' "$extra" >>"$T/bad.conf"
	if "$WBD" -n -c "$T/bad.conf" >"$T/n.out" 2>&1; then
		fail "wbd -n accepted: $extra"
	fi
	grep -q "bad.conf:[0-9]*: .*$want" "$T/n.out" || { cat "$T/n.out"; fail "wbd -n did not say '$want' with FILE:LINE"; }
}
check 'alternatives' "tls = { mode = \"on\"; certificates = \"$T/pki\"; psk_file = \"$T/keys.psk\"; };"
check 'expected certificates' 'tls = { mode = "on"; };'
check 'verify_peer only with certificates' "tls = { mode = \"on\"; psk_file = \"$T/keys.psk\"; verify_peer = true; };"
check 'expected "off", "on" or "require"' 'tls = { mode = "maybe"; };'
sed 's|readonly = false; }|readonly = false; tls = "require"; }|' "$T/base.conf" >"$T/bad.conf"
"$WBD" -n -c "$T/bad.conf" >"$T/n.out" 2>&1 && fail "wbd -n accepted a TLS-only export with TLS off"
grep -q 'bad.conf:[0-9]*: exports\[0\].tls: .*TLS is off' "$T/n.out" || { cat "$T/n.out"; fail "no FILE:LINE for a TLS-only export with TLS off"; }
echo "garbage" >"$T/pki/server-key.pem"
check 'server-key.pem' "tls = { mode = \"on\"; certificates = \"$T/pki\"; };"
echo "alice:xyz" >"$T/badkey.psk"
check 'badkey.psk:1: the key of "alice" is not' "tls = { mode = \"on\"; psk_file = \"$T/badkey.psk\"; };"
exit 0
