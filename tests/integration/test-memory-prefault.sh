#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# memory.prefault (on by default): the cache's memory is faulted in at
# start in the background -- wbctl status counts it up to the cache size,
# the log says how long it took, RSS holds the cache -- and data written
# while it runs reads back whole, through the cache and from the file after
# FLUSH and exit.  With prefault = false nothing is faulted in ahead, and
# RSS stays well under the cache.  A reload that changes it says it needs
# a restart.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"

status() { "$WBCTL" -s "$T/control.sock" status --json; }

# --- on (the default), a 512 MiB cache, written to at once ---------------
add_export disk0 64M rw
write_cache_config 512M 'dirty_writeback_centisecs = 0;'
grep -q "prefault *=" "$CONF" && fail "the test config names memory.prefault: the default is what is tested"
head -c 32M /dev/urandom >"$T/data.bin"
start_wbd
# At once: the payload lands while the thread is (likely) still at work.
nbdcopy "$T/data.bin" "$(uri_unix disk0)" || fail "nbdcopy into wbd failed"
nbdcopy "$(uri_unix disk0)" "$T/back.bin" || fail "nbdcopy out of wbd failed"
cmp <(head -c 32M "$T/back.bin") "$T/data.bin" || fail "data read back differs"
for ((i = 0; i < 300; i++)); do
	j=$(status) || fail "wbctl status failed"
	done_b=$(jq -e '.cache.prefaulted_bytes' <<<"$j") ||
		fail "no cache.prefaulted_bytes in wbctl status --json"
	size_b=$(jq -e '.cache.size_bytes' <<<"$j") || fail "no cache.size_bytes"
	((done_b == size_b)) && break
	sleep 0.1
done
((done_b == size_b)) || fail "prefaulted_bytes $done_b of $size_b after 30 s"
grep -Eq 'memory\.prefault: the cache.s 512\.0 MiB faulted in, in [0-9.]+ s' "$LOG" ||
	fail "no 'faulted in' line in the log"
rss=$(vmrss_kib "$WBD_PID")
((rss >= 512 * 1024)) || fail "RSS $rss KiB after the prefault of a 512 MiB cache"
log "prefaulted: $done_b bytes, RSS $rss KiB"
# A reload that changes it needs a restart, and says so.
sed -i 's/^writeback = {/memory = { prefault = false; };\nwriteback = {/' "$CONF"
out=$("$WBCTL" -s "$T/control.sock" reload 2>&1) || true
grep -q 'memory.prefault changed: needs a restart' <<<"$out$(cat "$LOG")" ||
	fail "reload did not say memory.prefault needs a restart: $out"
"$WBCTL" -s "$T/control.sock" flush disk0 >/dev/null || fail "wbctl flush failed"
stop_wbd
((EXIT_STATUS == 0)) || fail "wbd exited with $EXIT_STATUS"
cmp <(head -c 32M "$T/disk0.img") "$T/data.bin" || fail "the file differs after FLUSH and exit"

# --- off ------------------------------------------------------------------
: >"$LOG"
start_wbd
sleep 1
j=$(status) || fail "wbctl status failed"
done_b=$(jq -e '.cache.prefaulted_bytes' <<<"$j") || fail "no cache.prefaulted_bytes"
((done_b == 0)) || fail "prefault = false, yet $done_b bytes faulted in"
rss=$(vmrss_kib "$WBD_PID")
((rss < 256 * 1024)) || fail "prefault = false, yet RSS is $rss KiB with a 512 MiB cache"
! grep -q 'memory\.prefault:' "$LOG" || fail "prefault = false, yet the log speaks of it"
nbdcopy "$(uri_unix disk0)" "$T/back2.bin" || fail "nbdcopy out of wbd failed"
cmp <(head -c 32M "$T/back2.bin") "$T/data.bin" || fail "data read back differs (prefault off)"
log "off: nothing faulted in ahead, RSS $rss KiB"
assert_alive
