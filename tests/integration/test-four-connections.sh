#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Four connections at once: nbdcopy --connections=4 in and out returns the
# data unchanged, and four independent clients writing their own regions at
# the same time each read back exactly what they wrote.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need nbdcopy qemu-io cmp

add_export disk0 64M rw
start_wbd

head -c 64M /dev/urandom >"$T/in.bin"

for uri in "$(uri_unix disk0)" "$(uri_tcp disk0)"; do
	log "nbdcopy --connections=4 over $uri"
	nbdcopy --connections=4 --requests=16 "$T/in.bin" "$uri" ||
		fail "nbdcopy --connections=4 into $uri failed"
	rm -f "$T/out.bin"
	nbdcopy --connections=4 --requests=16 "$uri" "$T/out.bin" ||
		fail "nbdcopy --connections=4 out of $uri failed"
	cmp "$T/in.bin" "$T/out.bin" || fail "four-connection copy over $uri changed the data"
	# Fresh data for the next round.
	head -c 64M /dev/urandom >"$T/in.bin"
done

log "four clients writing their own regions at once"
pids=()
for i in 0 1 2 3; do
	if ((i % 2)); then uri=$(uri_tcp disk0); else uri=$(uri_unix disk0); fi
	qemu-io -f raw "$uri" \
		-c "write -P $((0x41 + i)) $((i * 16))M 8M" \
		-c "write -P $((0x61 + i)) $((i * 16 + 8))M 8M" \
		-c "read -P $((0x41 + i)) $((i * 16))M 8M" \
		-c "read -P $((0x61 + i)) $((i * 16 + 8))M 8M" \
		>"$T/client-$i.out" 2>&1 &
	pids+=($!)
done
for i in 0 1 2 3; do
	wait "${pids[$i]}" || fail "client $i failed: $(cat "$T/client-$i.out")"
	if grep -Eqi 'fail|error' "$T/client-$i.out"; then
		fail "client $i: $(cat "$T/client-$i.out")"
	fi
done
# And each region is intact when read over a single new connection.
for i in 0 1 2 3; do
	out=$(qemu-io -f raw "$(uri_unix disk0)" \
		-c "read -P $((0x41 + i)) $((i * 16))M 8M" \
		-c "read -P $((0x61 + i)) $((i * 16 + 8))M 8M" 2>&1) ||
		fail "re-reading region $i failed: $out"
	grep -Eqi 'fail|error' <<<"$out" && fail "region $i: $out"
done
assert_alive
