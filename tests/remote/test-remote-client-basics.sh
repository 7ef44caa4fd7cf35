#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The client suite through an export backed by "nbdkit memory": nbdinfo
# shows the remote's size and commands, nbdcopy round-trips random data,
# fio verifies random writes; a read-only remote makes a read-only export,
# and a remote without fast zeroing is not advertised as having it.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need nbdinfo nbdcopy

start_nbdkit mem memory 64M
MEM=$KIT_SOCK
start_nbdkit ro -r memory 16M
RO=$KIT_SOCK
start_nbdkit nozero --filter=nozero memory 16M
NOZERO=$KIT_SOCK

add_remote_export disk0 "$(kit_uri "$MEM")"
add_remote_export ro "$(kit_uri "$RO")"
add_remote_export nozero "$(kit_uri "$NOZERO")"
start_wbd

info=$(nbdinfo "$(uri_unix disk0)") || fail "nbdinfo failed"
grep -q 'export-size: 67108864' <<<"$info" || fail "size is not the remote's 64M: $info"
for cap in can_flush can_fua can_trim can_zero can_fast_zero can_multi_conn; do
	grep -q "$cap: true" <<<"$info" || fail "$cap is not advertised: $info"
done
grep -q 'is_read_only: false' <<<"$info" || fail "disk0 is read-only: $info"

info=$(nbdinfo "$(uri_unix ro)") || fail "nbdinfo ro failed"
grep -q 'is_read_only: true' <<<"$info" || fail "a read-only remote gave a writable export: $info"
grep -q 'export-size: 16777216' <<<"$info" || fail "ro size: $info"

info=$(nbdinfo "$(uri_unix nozero)") || fail "nbdinfo nozero failed"
grep -q 'can_fast_zero: false' <<<"$info" ||
	fail "fast zero advertised for a remote without WRITE_ZEROES: $info"

log "nbdcopy 48M of random data in and out"
head -c 48M /dev/urandom >"$T/in"
nbdcopy --flush "$T/in" "$(uri_unix disk0)" || fail "nbdcopy in failed"
nbdcopy "$(uri_unix disk0)" "$T/out" || fail "nbdcopy out failed"
cmp -n $((48 << 20)) "$T/in" "$T/out" || fail "data read back through wbd differs"
nbdcopy "$(kit_uri "$MEM")" "$T/remote" || fail "nbdcopy from nbdkit failed"
cmp -n $((48 << 20)) "$T/in" "$T/remote" || fail "data on nbdkit after FLUSH differs"

if command -v fio >/dev/null && fio --enghelp 2>/dev/null | grep -qw nbd; then
	log "fio randwrite and randrw with verify"
	fio --name=rw --ioengine=nbd --uri="$(uri_unix disk0)" --rw=randwrite \
		--bs=4k --size=16M --iodepth=16 --verify=crc32c --verify_fatal=1 \
		--do_verify=1 --verify_state_save=0 --output="$T/fio1.out" \
		>/dev/null 2>&1 || fail "fio randwrite verify: $(cat "$T/fio1.out")"
	fio --name=mixed --ioengine=nbd --uri="$(uri_unix disk0)" --rw=randrw \
		--bs=64k --size=32M --iodepth=8 --verify=crc32c --verify_fatal=1 \
		--verify_state_save=0 --output="$T/fio2.out" \
		>/dev/null 2>&1 || fail "fio randrw verify: $(cat "$T/fio2.out")"
else
	log "fio with an nbd engine not installed: fio part skipped"
fi

grep -q 'device 43:' "$LOG" || fail "the export is not on a 43:N device"
assert_alive
stop_wbd
((EXIT_STATUS == 0)) || fail "wbd exited $EXIT_STATUS"

# A fresh wbd has nothing cached: every read is a miss served by nbdkit.
nbdcopy "$(kit_uri "$MEM")" "$T/remote" || fail "nbdcopy from nbdkit failed"
start_wbd
nbdcopy "$(uri_unix disk0)" "$T/out" || fail "nbdcopy out (cold cache) failed"
cmp "$T/remote" "$T/out" || fail "cold-cache reads through wbd differ from nbdkit"
