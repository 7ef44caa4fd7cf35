#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# wbd:dirty tells pages being written back from pages only dirty: 64 KiB
# are written (dirty: 1); the remote (nbdkit's pause filter) is paused and
# a FLUSH starts writing them back, so nbdinfo --map=wbd:dirty shows them
# dirty and under writeback (3) while the remote holds the write; once it
# is resumed the FLUSH ends and nothing is dirty (0).
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_pause_filter
need nbdinfo

MiB=$((1 << 20))
PAUSE=$T/pause.sock
start_nbdkit kit --filter=pause memory 16M pause-control="$PAUSE"
KIT=$KIT_SOCK
use_pause_control "$PAUSE"

add_remote_export disk0 "$(kit_uri "$KIT")"
write_cache_config 64M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
# Dirty data waits for the FLUSH (or the drain): no write-behind.
add_remote_settings 'io_timeout_ms = 120000; write_behind = false;'
start_wbd
U=$(uri_unix disk0)

"$PYTHON" -c 'import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
h.pwrite(b"\x42" * 65536, 1 << 20); h.shutdown()' "$U"
expect_map "$U" wbd:dirty $((1 * MiB)) 1 "written, not flushed"

pause_ctl "$PAUSE" p
"$PYTHON" -c 'import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1]); h.flush()
open(sys.argv[2], "w").write("done\n")' "$U" "$T/flushed" &
FLUSH_PID=$!
seen=
for ((i = 0; i < 300; i++)); do
	if [[ $(map_flags "$U" $((1 * MiB)) wbd:dirty) == 3 ]]; then
		seen=1
		break
	fi
	sleep 0.1
done
[[ -n $seen ]] || fail "the range never showed as under writeback: $(nbdinfo --map=wbd:dirty "$U")"
[[ ! -e $T/flushed ]] || fail "the FLUSH ended while the remote was paused"
expect_map "$U" wbd:dirty 0 0 "the unwritten page before"

pause_ctl "$PAUSE" r
wait_exit "$FLUSH_PID" 60 || fail "the FLUSH did not end after the remote was resumed"
[[ $EXIT_STATUS == 0 && -e $T/flushed ]] || fail "the FLUSH failed"
expect_map "$U" wbd:dirty $((1 * MiB)) 0 "after the FLUSH"
assert_alive
