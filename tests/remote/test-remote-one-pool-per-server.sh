#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Each remote server is one writeback device, 43:N in order of first
# appearance, with its own flush-43:N pool: two exports on one server share
# 43:0; the second server is 43:1; a local file keeps its own device.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need nbdcopy

start_nbdkit a memory 16M
A=$KIT_SOCK
start_nbdkit b memory 16M
B=$KIT_SOCK
add_remote_export a1 "$(kit_uri "$A" one)"
add_remote_export b1 "$(kit_uri "$B")"
add_remote_export a2 "$(kit_uri "$A" two)"
add_export local 16M rw
write_cache_config 64M 'min_workers = 2;'
start_wbd

grep -q 'export "a1": .*device 43:0' "$LOG" || fail "a1 is not on 43:0"
grep -q 'export "b1": .*device 43:1' "$LOG" || fail "b1 is not on 43:1"
grep -q 'export "a2": .*device 43:0' "$LOG" || fail "a2 (same server as a1) is not on 43:0"
grep -q 'wbd .* ready: 4 export(s), .*, 3 writeback device(s)' "$LOG" ||
	fail "expected 3 writeback devices: $(grep ready "$LOG")"

for e in a1 a2 b1 local; do
	head -c 2M /dev/urandom | nbdcopy --flush - "$(uri_unix "$e")" ||
		fail "writing to $e failed"
done
names=$(thread_names "$WBD_PID" | sort -u)
pools=$(grep -c '^flush-43:' <<<"$names" || true)
((pools == 2)) || fail "expected flush-43:0 and flush-43:1 only, got: $names"
grep -qx 'flush-43:0' <<<"$names" || fail "no flush-43:0 thread: $names"
grep -qx 'flush-43:1' <<<"$names" || fail "no flush-43:1 thread: $names"
local_dev=$(dev_majmin "$T/local.img")
grep -qx "flush-$local_dev" <<<"$names" || fail "no flush-$local_dev for the file: $names"
count=$(count_threads "$WBD_PID" flush-43:0)
((count >= 2)) ||
	fail "flush-43:0 should have min_workers (2) threads, has $count"
