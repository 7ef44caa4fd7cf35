# SPDX-License-Identifier: GPL-2.0-or-later
# lib-tls.sh - certificates and PSK keys for the TLS tests, made on the fly
# with GnuTLS's certtool and psktool (never committed).  Source after lib.sh.
#
# make_ca DIR NAME: a CA in DIR (ca-cert.pem, ca-key.pem).
# make_server_cert CADIR OUTDIR: OUTDIR gets ca-cert.pem, server-cert.pem,
#   server-key.pem (for 127.0.0.1 and localhost), nbdkit's and qemu's layout.
# make_client_cert CADIR OUTDIR CN: OUTDIR gets ca-cert.pem (of CADIR),
#   client-cert.pem, client-key.pem: libnbd's tls-certificates layout.
# make_psk FILE USER: a random key for USER in FILE ("user:hexkey").

need certtool
need psktool

_certtool() {
	certtool "$@" >/dev/null 2>&1 || fail "certtool $* failed"
}

make_ca() {
	local dir=$1 name=$2
	mkdir -p "$dir"
	printf 'cn = %s\nca\ncert_signing_key\nexpiration_days = 2\n' "$name" >"$dir/ca.info"
	_certtool --generate-privkey --outfile "$dir/ca-key.pem"
	_certtool --generate-self-signed --load-privkey "$dir/ca-key.pem" \
		--template "$dir/ca.info" --outfile "$dir/ca-cert.pem"
}

_make_cert() {
	local ca=$1 out=$2 who=$3 info=$4
	mkdir -p "$out"
	printf '%s' "$info" >"$out/$who.info"
	_certtool --generate-privkey --outfile "$out/$who-key.pem"
	_certtool --generate-certificate --load-ca-certificate "$ca/ca-cert.pem" \
		--load-ca-privkey "$ca/ca-key.pem" --load-privkey "$out/$who-key.pem" \
		--template "$out/$who.info" --outfile "$out/$who-cert.pem"
	cp "$ca/ca-cert.pem" "$out/ca-cert.pem"
}

make_server_cert() {
	_make_cert "$1" "$2" server 'organization = wbd tests
cn = localhost
dns_name = localhost
ip_address = 127.0.0.1
tls_www_server
encryption_key
signing_key
expiration_days = 2
'
}

make_client_cert() {
	_make_cert "$1" "$2" client "organization = wbd tests
cn = $3
tls_www_client
encryption_key
signing_key
expiration_days = 2
"
}

make_psk() {
	psktool -u "$2" -p "$1" >/dev/null 2>&1 || fail "psktool failed"
}
