#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A TCP listener on an address other than loopback, with TLS off and an
# export that has no allow list, is warned about once, naming the address
# and the exports: by wbd -n, and at start (in a network namespace of its
# own, which has only a loopback interface, so nothing is exposed).  No
# warning when every export has an allow list, when TLS is on, or for
# loopback listeners.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"

P=$(free_port)
truncate -s 1M "$T/a.img" "$T/b.img"
# conf FILE LISTENERS ALLOW_B: a config with exports a (allow list) and b.
conf() {
	cat >"$1" <<EOF
listen = { tcp = [ $2 ]; unix = [ "$T/nbd.sock" ]; };
control = { socket = "none"; };
exports = (
  { name = "a"; backing = "$T/a.img"; allow = [ "10.0.0.0/8" ]; },
  { name = "b"; backing = "$T/b.img"; ${3:-} }
);
EOF
}

check() {
	OUT=$("$WBD" -n -c "$1" 2>&1) || fail "wbd -n $1 failed: $OUT"
	grep -q 'configuration OK' <<<"$OUT" || fail "no 'configuration OK': $OUT"
}

conf "$T/any.conf" "\"127.0.0.1:$P\", \"0.0.0.0:$P\", \"[::]:$P\""
check "$T/any.conf"
n=$(grep -c 'not a loopback address, and TLS is off' <<<"$OUT" || true)
[[ $n == 2 ]] || fail "expected two warnings (0.0.0.0 and [::]), got $n: $OUT"
grep -q "listen tcp 0.0.0.0:$P: not a loopback address, and TLS is off: anyone who reaches it can read and write export \"b\", which has no allow list" <<<"$OUT" ||
	fail "the warning does not name the address and the export: $OUT"
grep -q "listen tcp \[::\]:$P: not a loopback" <<<"$OUT" || fail "[::] not warned about: $OUT"
grep -q "127.0.0.1:$P: not a loopback" <<<"$OUT" && fail "loopback warned about: $OUT"

conf "$T/guarded.conf" "\"0.0.0.0:$P\"" 'allow = [ "uid:0" ];'
check "$T/guarded.conf"
grep -q 'loopback' <<<"$OUT" && fail "warned although every export has an allow list: $OUT"

if command -v psktool >/dev/null 2>&1; then
	psktool -u alice -p "$T/keys.psk" >/dev/null 2>&1 || fail "psktool failed"
	conf "$T/tls.conf" "\"0.0.0.0:$P\""
	echo "tls = { mode = \"on\"; psk_file = \"$T/keys.psk\"; };" >>"$T/tls.conf"
	check "$T/tls.conf"
	grep -q 'loopback' <<<"$OUT" && fail "warned although TLS is on: $OUT"
fi

conf "$T/loopback.conf" "\"127.0.0.1:$P\", \"[::1]:$P\", \"localhost:$P\""
check "$T/loopback.conf"
grep -q 'loopback' <<<"$OUT" && fail "warned about loopback listeners: $OUT"

log "at start, once"
unshare -n true 2>/dev/null || skip "cannot make a network namespace (unshare -n)"
conf "$T/start.conf" "\"0.0.0.0:$P\""
unshare -n "$WBD" -f -c "$T/start.conf" >"$T/start.log" 2>&1 &
pid=$!
track_wbd "$pid" "$T/start.log"
for ((i = 0; i < 300; i++)); do
	grep -q 'ready:' "$T/start.log" && break
	proc_alive "$pid" || fail "wbd exited: $(cat "$T/start.log")"
	sleep 0.1
done
grep -q 'ready:' "$T/start.log" || fail "wbd not ready within 30 s"
n=$(grep -c "listen tcp 0.0.0.0:$P: not a loopback address" "$T/start.log" || true)
[[ $n == 1 ]] || fail "expected one warning at start, got $n"
stop_wbd "$pid"
