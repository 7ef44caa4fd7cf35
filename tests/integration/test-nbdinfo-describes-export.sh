#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# nbdinfo --json describes each export correctly, over the Unix socket and
# over TCP: size, read-only flag, the advertised capabilities, the block size
# constraints (1 / 4096 / 32 MiB) and the description.  An empty export name
# selects the first export.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need nbdinfo jq

add_export disk0 64M rw "scratch disk"
add_export ro 16M ro "read-only disk"
start_wbd

# check_json URI FILTER...: every jq FILTER is true of nbdinfo's JSON.
check_json() {
	local uri=$1 json f
	shift
	json=$(nbdinfo --json "$uri") || fail "nbdinfo --json $uri failed"
	for f in "$@"; do
		jq -e ".exports[0] | $f" >/dev/null <<<"$json" ||
			fail "nbdinfo --json $uri: expected $f, got: $json"
	done
}

for uri in "$(uri_unix disk0)" "$(uri_tcp disk0)"; do
	log "checking $uri"
	check_json "$uri" \
		'."export-name" == "disk0"' \
		'."export-size" == 67108864' \
		'.description == "scratch disk"' \
		'.is_read_only == false' \
		'.can_flush == true' \
		'.can_fua == true' \
		'.can_trim == true' \
		'.can_zero == true' \
		'.can_fast_zero == true' \
		'.can_multi_conn == true' \
		'.block_size_minimum == 1' \
		'.block_size_preferred == 4096' \
		'.block_size_maximum == 33554432'
	json=$(nbdinfo --json "$uri")
	jq -e '.protocol == "newstyle-fixed" and .structured == true' \
		>/dev/null <<<"$json" ||
		fail "$uri: expected fixed newstyle with structured replies: $json"
done

for uri in "$(uri_unix ro)" "$(uri_tcp ro)"; do
	log "checking $uri"
	check_json "$uri" \
		'."export-name" == "ro"' \
		'."export-size" == 16777216' \
		'.description == "read-only disk"' \
		'.is_read_only == true' \
		'.can_flush == true' \
		'.can_multi_conn == true' \
		'.block_size_minimum == 1' \
		'.block_size_preferred == 4096' \
		'.block_size_maximum == 33554432'
done

# The empty export name (nbd+unix:///?socket=...) selects the first export.
log "checking the default export"
size=$(nbdinfo --size "nbd+unix:///?socket=$SOCK") ||
	fail "nbdinfo --size on the empty export name failed"
[[ $size == 67108864 ]] || fail "default export: expected size 67108864, got $size"
size=$(nbdinfo --size "nbd://127.0.0.1:$PORT") ||
	fail "nbdinfo --size nbd://127.0.0.1:$PORT failed"
[[ $size == 67108864 ]] || fail "default export over TCP: expected 67108864, got $size"

# An unknown export is refused, and the daemon goes on serving.
if nbdinfo --size "$(uri_unix nosuchexport)" >"$T/out" 2>&1; then
	fail "nbdinfo on an unknown export succeeded: $(cat "$T/out")"
fi
nbdinfo --size "$(uri_unix disk0)" >/dev/null || fail "daemon stopped serving"
assert_alive
