#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Allow lists that name TLS identities: psk:NAME admits the client that
# completed TLS with that PSK username and no other; cn:NAME the client
# whose certificate, checked against the CA (verify_peer), has that common
# name; without verify_peer no certificate names anyone.  LIST shows each
# client its own exports.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
source "$SRCDIR/lib-tls.sh"
need nbdinfo jq

log "psk:"
make_psk "$T/keys.psk" alice
make_psk "$T/keys.psk" bob
add_export_allow for-alice 1M psk:alice
add_export_allow for-bob 1M psk:bob
add_export_allow for-host1 1M cn:host1.example.org
write_config
cp "$CONF" "$T/base.conf"
echo "tls = { mode = \"require\"; psk_file = \"$T/keys.psk\"; };" >>"$CONF"
start_wbd

psk_uri() { printf 'nbds://%s@127.0.0.1:%s/%s?tls-psk-file=%s' "$1" "$PORT" "$2" "$T/keys.psk"; }
opens() { nbdinfo "$1" >"$T/out" 2>&1; }
opens "$(psk_uri alice for-alice)" || fail "alice refused for-alice: $(cat "$T/out")"
opens "$(psk_uri bob for-bob)" || fail "bob refused for-bob: $(cat "$T/out")"
opens "$(psk_uri alice for-bob)" && fail "alice was let into for-bob"
opens "$(psk_uri bob for-host1)" && fail "a PSK client was let in by a cn: entry"
grep -q 'export "for-bob" refused: 127.0.0.1 psk alice matches none of the 1 entries' "$LOG" ||
	fail "the refusal does not name the PSK user"
names=$(nbdinfo --list --json "$(psk_uri alice "")" | jq -r '[.exports[]."export-name"] | join(",")') ||
	fail "LIST as alice failed"
[[ $names == for-alice ]] || fail "alice's LIST: expected for-alice, got '$names'"
stop_wbd

log "cn: with verify_peer"
make_ca "$T/ca" "wbd test CA"
make_server_cert "$T/ca" "$T/pki"
make_client_cert "$T/ca" "$T/host1" host1.example.org
make_client_cert "$T/ca" "$T/host2" host2.example.org
cert_uri() { printf 'nbds://127.0.0.1:%s/%s?tls-certificates=%s' "$PORT" "$2" "$1"; }
cp "$T/base.conf" "$CONF"
echo "tls = { mode = \"require\"; certificates = \"$T/pki\"; verify_peer = true; };" >>"$CONF"
start_wbd
opens "$(cert_uri "$T/host1" for-host1)" || fail "host1 refused for-host1: $(cat "$T/out")"
opens "$(cert_uri "$T/host2" for-host1)" && fail "host2 was let into for-host1"
opens "$(cert_uri "$T/host1" for-alice)" && fail "a certificate was let in by a psk: entry"
grep -q 'export "for-host1" refused: 127.0.0.1 cn host2.example.org matches none' "$LOG" ||
	fail "the refusal does not name the certificate's CN"
stop_wbd

log "cn: without verify_peer names no one"
cp "$T/base.conf" "$CONF"
echo "tls = { mode = \"require\"; certificates = \"$T/pki\"; };" >>"$CONF"
start_wbd
opens "$(cert_uri "$T/host1" for-host1)" && fail "an unverified certificate was let in by its CN"
assert_alive
