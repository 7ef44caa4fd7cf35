#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# wbd listens on several addresses at once — IPv4, IPv6 ([::1]:PORT) and a
# Unix socket — and serves the same exports on each.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need nbdinfo

/usr/bin/python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null ||
	skip "no IPv6 loopback (::1) on this machine"

add_export disk0 16M rw
write_config
port6=$(free_port)
sed -i "s|^listen = { tcp = \[ \"127.0.0.1:$PORT\" \];|listen = { tcp = [ \"127.0.0.1:$PORT\", \"[::1]:$port6\" ];|" "$CONF"
grep -q "::1" "$CONF" || fail "could not add the IPv6 listener to $CONF"
start_wbd

for uri in "$(uri_tcp disk0)" "nbd://[::1]:$port6/disk0" "$(uri_unix disk0)"; do
	size=$(nbdinfo --size "$uri") || fail "no answer on $uri"
	[[ $size == 16777216 ]] || fail "$uri: size $size"
	log "ok $uri"
done
grep -q "listening on tcp \[::1\]:$port6" "$LOG" || fail "the log does not name the IPv6 listener"
