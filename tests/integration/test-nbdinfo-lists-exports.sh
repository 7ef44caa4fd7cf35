#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# nbdinfo --list --json shows every configured export, in order, with its
# size and description, over the Unix socket and over TCP.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need nbdinfo jq

add_export disk0 64M rw "scratch disk"
add_export ro 16M ro "read-only disk"
add_export third 1M rw
start_wbd

for uri in "nbd+unix:///?socket=$SOCK" "nbd://127.0.0.1:$PORT"; do
	log "listing $uri"
	json=$(nbdinfo --list --json "$uri") || fail "nbdinfo --list --json $uri failed"
	names=$(jq -r '[.exports[]."export-name"] | join(",")' <<<"$json")
	[[ $names == disk0,ro,third ]] ||
		fail "$uri: expected exports disk0,ro,third, got '$names': $json"
	jq -e '
		(.exports[0] | ."export-size" == 67108864 and .description == "scratch disk"
			and .is_read_only == false) and
		(.exports[1] | ."export-size" == 16777216 and .description == "read-only disk"
			and .is_read_only == true) and
		(.exports[2] | ."export-size" == 1048576 and .is_read_only == false)
	' >/dev/null <<<"$json" || fail "$uri: wrong sizes, flags or descriptions: $json"
done

# The plain-text listing names them too.
nbdinfo --list "nbd+unix:///?socket=$SOCK" >"$T/list" || fail "nbdinfo --list failed"
for n in disk0 ro third; do
	grep -q "export=\"$n\"\|export=$n\|$n" "$T/list" ||
		fail "nbdinfo --list does not show $n: $(cat "$T/list")"
done
assert_alive
