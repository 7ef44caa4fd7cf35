#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# 32 MiB of random data copied into an export with nbdcopy comes back out
# byte for byte (over the Unix socket and over TCP), and qemu-img compare
# agrees that the export and the file are identical.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need nbdcopy qemu-img cmp

add_export disk0 32M rw
start_wbd

head -c 32M /dev/urandom >"$T/in.bin"

log "nbdcopy in over the Unix socket"
nbdcopy "$T/in.bin" "$(uri_unix disk0)" || fail "nbdcopy into $(uri_unix disk0) failed"

log "nbdcopy out over the Unix socket"
nbdcopy "$(uri_unix disk0)" "$T/out-unix.bin" || fail "nbdcopy out of $(uri_unix disk0) failed"
cmp "$T/in.bin" "$T/out-unix.bin" || fail "data read back over Unix differs from what was written"

log "nbdcopy out over TCP"
nbdcopy "$(uri_tcp disk0)" "$T/out-tcp.bin" || fail "nbdcopy out of $(uri_tcp disk0) failed"
cmp "$T/in.bin" "$T/out-tcp.bin" || fail "data read back over TCP differs from what was written"

log "qemu-img compare"
qemu-img compare -f raw -F raw "$T/in.bin" "$(uri_unix disk0)" ||
	fail "qemu-img compare $T/in.bin $(uri_unix disk0): images differ"
qemu-img compare -f raw -F raw "$T/in.bin" "$(uri_tcp disk0)" ||
	fail "qemu-img compare $T/in.bin $(uri_tcp disk0): images differ"

# Overwrite over TCP with new data (and --flush), read it back over Unix.
head -c 32M /dev/urandom >"$T/in2.bin"
nbdcopy --flush "$T/in2.bin" "$(uri_tcp disk0)" || fail "second nbdcopy in over TCP failed"
nbdcopy "$(uri_unix disk0)" "$T/out2.bin" || fail "second nbdcopy out failed"
cmp "$T/in2.bin" "$T/out2.bin" || fail "data written over TCP differs when read over Unix"

# qemu-img compare notices a difference (the check above is not vacuous).
if qemu-img compare -q -f raw -F raw "$T/in.bin" "$(uri_unix disk0)"; then
	fail "qemu-img compare found no difference after an overwrite"
fi
assert_alive
