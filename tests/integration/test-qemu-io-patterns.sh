#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# qemu-io pattern writes and reads, aligned and unaligned, leave exactly the
# bytes written and nothing around them changed; write -z zeroes, discard
# succeeds, FUA writes and flushes succeed, and the data is still there on a
# new connection.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need qemu-io

add_export disk0 64M rw
start_wbd

# qio URI COMMAND...: run qemu-io with one -c per COMMAND; fail if qemu-io
# fails or reports a pattern mismatch or an I/O error.
qio() {
	local uri=$1 args=() c out
	shift
	for c in "$@"; do args+=(-c "$c"); done
	if ! out=$(qemu-io -f raw "${args[@]}" "$uri" 2>&1); then
		fail "qemu-io $uri ${*@Q} failed: $out"
	fi
	if grep -Eqi 'verification failed|error|failed|not permitted' <<<"$out"; then
		fail "qemu-io $uri ${*@Q}: $out"
	fi
}

for uri in "$(uri_unix disk0)" "$(uri_tcp disk0)"; do
	log "patterns over $uri"
	# A fresh sparse export reads as zeroes.
	qio "$uri" 'read -P 0 32M 1M'

	# Aligned.
	qio "$uri" 'write -P 0xab 0 64k' 'read -P 0xab 0 64k'

	# Unaligned, inside the 0xab region: the bytes around are unchanged.
	qio "$uri" 'write -P 0x11 513 1000' 'read -P 0x11 513 1000' \
		'read -P 0xab 0 513' 'read -P 0xab 1513 64023'

	# Unaligned across a 4 KiB page boundary.
	qio "$uri" 'write -P 0x22 4000 200' 'read -P 0x22 4000 200' \
		'read -P 0xab 3990 10' 'read -P 0xab 4200 100'

	# Odd offset and length at the end of the export.
	qio "$uri" 'write -P 0x33 67108863 1' 'read -P 0x33 67108863 1' \
		'write -P 0x34 67104000 3000' 'read -P 0x34 67104000 3000'

	# Larger writes with FUA, a flush, and a multi-MiB read.
	qio "$uri" 'write -f -P 0x44 1M 3M' 'flush' 'read -P 0x44 1M 3M'

	# write -z zeroes a range (with and without permission to unmap).
	qio "$uri" 'write -z 8k 4k' 'read -P 0 8k 4k' 'read -P 0xab 12k 4k' 'read -P 0xab 5k 3k'
	qio "$uri" 'write -z -u 1M 64k' 'read -P 0 1M 64k' 'read -P 0x44 1088k 64k'
	qio "$uri" 'write -z -f 2M 1000' 'read -P 0 2M 1000' 'read -P 0x44 2000000 1000'

	# discard succeeds and leaves its neighbours alone (what a discarded
	# range reads as is up to the server).
	qio "$uri" 'discard 16k 4k' 'read -P 0xab 12k 4k' 'read -P 0xab 20k 4k'
	qio "$uri" 'discard 24000 3000' 'read -P 0xab 23999 1' 'read -P 0xab 27000 1'

	# Everything is still there on a new connection.
	qio "$uri" 'read -P 0x11 513 1000' 'read -P 0x22 4000 200' \
		'read -P 0x34 67104000 3000' 'read -P 0x44 3M 1M' 'read -P 0 8k 4k'

	# Reset for the next round.
	qio "$uri" 'write -z 0 4M' 'write -z 60M 4M' 'read -P 0 0 4M'
done

# Data written over one transport is read over the other.
qio "$(uri_unix disk0)" 'write -P 0x5a 5M 123457'
qio "$(uri_tcp disk0)" 'read -P 0x5a 5M 123457' 'read -P 0 5242879 1'
assert_alive
