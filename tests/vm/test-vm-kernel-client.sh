#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# test-vm-kernel-client.sh - the Linux kernel's NBD client (nbd.ko) against
# wbd, in a virtual machine: docs/vm-test.md.
#
# Takes Debian's kernel (apt-get download of the package linux-image-amd64
# depends on, unpacked with dpkg-deb -x, never installed; kept trimmed in a
# cache directory), builds an initramfs with busybox, nbd.ko and ext4, the
# wbd and wbctl of this build and Debian's nbd-client and e2fsprogs (each
# with the shared libraries ldd names), a CA, a server and a client
# certificate made with certtool for the TLS step, and boots it in
# qemu-system-x86_64 with no network card, KVM when /dev/kvm can be opened
# and TCG otherwise (and under TCG again when KVM stops qemu before the
# guest has run, or the guest under it says nothing for
# WBD_VM_KVM_PROBE_S: a /dev/kvm that opens but does not work, as on
# machines whose hypervisor does not nest it; one such booted a guest
# that spun at 100% of a CPU after "Probing EDD" until the 25-minute
# timeout).
# The guest (tests/vm/guest-init.sh) runs the test and powers off; this
# script reads the serial console's log.
#
# Usage: bash tests/vm/test-vm-kernel-client.sh [WBD_BINARY]
#        (default: $WBD, else build/daemon/wbd)
# Exit status: 0 pass, 1 fail, 77 skip (qemu, a tool or a kernel cannot be
# had; the reason is printed).  Without certtool (gnutls-bin) only the TLS
# step is skipped, and the guest says why.
# Environment:
#   WBD_VM_CACHE_DIR       where the trimmed kernel is kept
#                      (default ${XDG_CACHE_HOME:-~/.cache}/wbd-vm)
#   WBD_VM_KERNEL_DEB  a linux-image .deb to use instead of downloading one
#   WBD_VM_ACCEL       kvm or tcg, instead of choosing
#   WBD_VM_TIMEOUT     seconds before the guest is stopped (default 1500)
#   WBD_VM_KVM_PROBE_S seconds a guest under KVM has to say its first
#                      step before KVM is taken for broken (default 90)
#   KEEP_TMP=1         keep the temporary directory (initramfs, serial log)
set -uo pipefail

NAME=test-vm-kernel-client
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)

# What the guest does, in MiB: the files written before the first detach
# (FILES x FILE_MIB) are half as large again as wbd's cache; TLS_RAW_MIB
# goes through nbd-client's TLS proxy (software AES is slow under TCG).
CACHE_MIB=32 DISK_MIB=512 RAW_MIB=16 FILES=6 FILE_MIB=8 KILL_FILES=3
TLS_RAW_MIB=8
BACKING_TMPFS_MIB=640 GUEST_MIB=1024

say() { printf '%s: %s\n' "$NAME" "$*" >&2; }
skip() {
	printf 'SKIP: %s: %s\n' "$NAME" "$*" >&2
	exit 77
}
fail() {
	printf 'FAIL: %s: %s\n' "$NAME" "$*" >&2
	exit 1
}

WBD=${1:-${WBD:-$TOP/build/daemon/wbd}}
[[ -x $WBD ]] || fail "no wbd binary at $WBD (build first, or pass its path)"
WBD=$(cd "$(dirname "$WBD")" && pwd)/$(basename "$WBD")
WBCTL=${WBCTL:-$(dirname "$(dirname "$WBD")")/client/wbctl}
[[ -x $WBCTL ]] || fail "no wbctl binary at $WBCTL (set WBCTL)"

# need PROGRAM PACKAGE: skip unless PROGRAM is found (also in the sbin dirs).
export PATH=$PATH:/usr/sbin:/sbin
need() {
	command -v "$1" >/dev/null 2>&1 ||
		skip "$1 is not installed (Debian package $2; scripts/install-deps.sh installs it)"
}
need qemu-system-x86_64 qemu-system-x86
need busybox busybox-static
need nbd-client nbd-client
need mke2fs e2fsprogs
need e2fsck e2fsprogs
need cpio cpio
need depmod kmod
need modprobe kmod
need dpkg-deb dpkg
need ldd libc-bin

CACHE=${WBD_VM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/wbd-vm}
mkdir -p "$CACHE" || skip "cannot create the cache directory $CACHE"

T=$(mktemp -d "${TMPDIR:-/tmp}/wbd-vm.XXXXXX")
QEMU_PID=
cleanup() {
	[[ -n $QEMU_PID ]] && kill -KILL "$QEMU_PID" 2>/dev/null
	if [[ -n ${KEEP_TMP:-} ]]; then
		say "kept $T"
	else
		rm -rf "$T"
	fi
}
trap cleanup EXIT

# ------------------------------------------------------------- the kernel
# newest_cached: the most recently prepared kernel in the cache, if any.
newest_cached() {
	local d
	d=$(ls -td "$CACHE"/*/ok 2>/dev/null | head -n 1)
	[[ -n $d ]] && dirname "$d"
}

# unpack_kernel DEB NEW: unpack DEB, and keep in the directory NEW its
# vmlinuz, "release" (the kernel's version), the modules nbd and ext4 need
# with their soft dependencies, and "modules.order": their names in the
# order modprobe would load them.
unpack_kernel() {
	local deb=$1 new=$2 x=$T/unpacked root kver m line path
	rm -rf "$x"
	mkdir -p "$x" "$new/modules"
	dpkg-deb -x "$deb" "$x" || return 1
	for root in "$x" "$x/usr"; do
		[[ -d $root/lib/modules ]] && break
	done
	kver=$(ls "$root/lib/modules" 2>/dev/null | head -n 1)
	[[ -n $kver && -f $x/boot/vmlinuz-$kver ]] || { say "$deb holds no kernel"; return 1; }
	depmod -b "$root" "$kver" || return 1
	: >"$new/modules.order"
	for m in nbd ext4; do
		# "insmod PATH" per module to load; "builtin NAME" for none.
		modprobe -C /dev/null -d "$root" -S "$kver" --show-depends "$m" \
		    >"$T/deps" 2>&1 || { say "kernel $kver: $(cat "$T/deps")"; return 1; }
		while read -r line; do
			[[ $line == "insmod "* ]] || continue
			path=${line#insmod }
			path=${path%% *}
			grep -qxF "${path##*/}" "$new/modules.order" && continue
			cp "$path" "$new/modules/" || return 1
			echo "${path##*/}" >>"$new/modules.order"
		done <"$T/deps"
	done
	cp "$x/boot/vmlinuz-$kver" "$new/vmlinuz" || return 1
	echo "$kver" >"$new/release"
	touch "$new/ok"
	rm -rf "$x"
}

# prepare_kernel DEB DIR: unpack_kernel into DIR, atomically.
prepare_kernel() {
	local new
	new=$(mktemp -d "$CACHE/.new.XXXXXX") || return 1
	if ! unpack_kernel "$1" "$new"; then
		rm -rf "$new"
		return 1
	fi
	# Another run may have prepared the same kernel meanwhile: keep either.
	mv -T "$new" "$2" 2>/dev/null || rm -rf "$new"
}

# kernel_from_apt: set KDIR to the kernel linux-image-amd64 depends on now,
# downloading and preparing it unless it is cached; or set WHY, return 1.
WHY=
kernel_from_apt() {
	local pkg ver key
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
	ver=$(apt-cache policy "$pkg" 2>/dev/null | awk '$1 == "Candidate:" { print $2 }')
	if [[ -z $pkg || -z $ver || $ver == "(none)" ]]; then
		WHY="apt knows no linux-image-amd64"
		return 1
	fi
	key=${pkg}_$ver
	if [[ ! -f $CACHE/$key/ok ]]; then
		say "downloading $pkg $ver into $CACHE"
		rm -rf "$T/deb"
		mkdir -p "$T/deb"
		if ! (cd "$T/deb" && apt-get -qq -o APT::Sandbox::User="$(id -un)" \
		    download "$pkg=$ver"); then
			WHY="apt-get download $pkg=$ver failed"
			return 1
		fi
		if ! prepare_kernel "$T"/deb/*.deb "$CACHE/$key"; then
			WHY="cannot take nbd.ko and ext4 out of $pkg $ver"
			return 1
		fi
		rm -rf "$T/deb"
	fi
	KDIR=$CACHE/$key
}

# get_kernel: set KDIR to a prepared kernel: the one in WBD_VM_KERNEL_DEB,
# else apt's current one (after an apt-get update if apt's lists are
# missing or out of date and we are root), else the newest cached one.
get_kernel() {
	local deb key
	if [[ -n ${WBD_VM_KERNEL_DEB:-} ]]; then
		deb=$WBD_VM_KERNEL_DEB
		[[ -f $deb ]] || skip "WBD_VM_KERNEL_DEB=$deb does not exist"
		key=$(dpkg-deb -f "$deb" Package)_$(dpkg-deb -f "$deb" Version)
		[[ -f $CACHE/$key/ok ]] || prepare_kernel "$deb" "$CACHE/$key" ||
			skip "cannot use the kernel in $deb"
		KDIR=$CACHE/$key
		return
	fi
	kernel_from_apt && return
	if ((EUID == 0)); then
		say "$WHY; running apt-get update"
		apt-get update -qq >/dev/null 2>&1 && kernel_from_apt && return
	fi
	KDIR=$(newest_cached) || skip "$WHY, and no kernel is cached in $CACHE"
	say "$WHY; using the cached $(basename "$KDIR")"
}

get_kernel
say "kernel $(cat "$KDIR/release") from $KDIR; modules: $(tr '\n' ' ' <"$KDIR/modules.order")"

# -------------------------------------------------------------- initramfs
R=$T/root
mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,lib/modules,etc,proc,sys,dev,tmp,run,data,mnt}

# install_bin SRC DEST: copy a program and every shared library (and the
# dynamic loader) that ldd says it loads, at the same paths.
install_bin() {
	local src=$1 dst=$2 lib
	install -D -m 755 "$src" "$R$dst" || fail "cannot copy $src"
	ldd "$src" 2>/dev/null |
	    awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
	    while read -r lib; do
		[[ -e $R$lib ]] || install -D -m 755 "$(readlink -f "$lib")" "$R$lib" ||
			fail "cannot copy $lib"
	done
}

install_bin "$(command -v busybox)" /bin/busybox
for a in $(busybox --list); do
	[[ -e $R/bin/$a ]] || ln -s busybox "$R/bin/$a"
done
install_bin "$WBD" /usr/sbin/wbd
install_bin "$WBCTL" /usr/bin/wbctl
install_bin "$(command -v nbd-client)" /usr/sbin/nbd-client
install_bin "$(command -v mke2fs)" /usr/sbin/mke2fs
ln -s mke2fs "$R/usr/sbin/mkfs.ext4"
install_bin "$(command -v e2fsck)" /usr/sbin/e2fsck
[[ -f /etc/mke2fs.conf ]] && cp /etc/mke2fs.conf "$R/etc/"
cp "$KDIR"/modules/*.ko "$R/lib/modules/"
cp "$KDIR/modules.order" "$R/etc/vm-modules"
echo 'root:x:0:0:root:/:/bin/sh' >"$R/etc/passwd"
echo 'root:x:0:' >"$R/etc/group"
install -m 755 "$HERE/guest-init.sh" "$R/init"
# The TLS step's files (tests/integration/lib-tls.sh makes them, in a
# subshell where a missing certtool or a failure is a reason, not an exit):
# /etc/wbd-tls/pki for wbd, /etc/wbd-tls/client for nbd-client.
TLS_SKIP=
if ! command -v certtool >/dev/null 2>&1; then
	TLS_SKIP="certtool is not installed on the host (Debian package gnutls-bin)"
elif ! (
	need() { :; } # certtool is checked above; psktool is not used
	fail() { exit 1; }
	# shellcheck source=../integration/lib-tls.sh
	source "$TOP/tests/integration/lib-tls.sh"
	make_ca "$T/ca" "wbd VM test CA"
	make_server_cert "$T/ca" "$R/etc/wbd-tls/pki"
	make_client_cert "$T/ca" "$R/etc/wbd-tls/client" vm-client
); then
	TLS_SKIP="certtool could not make the certificates on the host"
fi
cat >"$R/etc/vm-test.env" <<EOF
TLS_SKIP="$TLS_SKIP"
CACHE_MIB=$CACHE_MIB
DISK_MIB=$DISK_MIB
RAW_MIB=$RAW_MIB
TLS_RAW_MIB=$TLS_RAW_MIB
FILES=$FILES
FILE_MIB=$FILE_MIB
KILL_FILES=$KILL_FILES
BACKING_TMPFS_MIB=$BACKING_TMPFS_MIB
EOF
# A sanitized wbd runs with the options the host's tests use.
for v in ASAN_OPTIONS UBSAN_OPTIONS; do
	[[ -n ${!v:-} ]] && printf 'export %s=%q\n' "$v" "${!v}" >>"$R/etc/vm-test.env"
done
(cd "$R" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) >"$T/initrd.cpio" ||
	fail "cpio failed"

# ------------------------------------------------------------------ boot
accel=${WBD_VM_ACCEL:-}
if [[ -z $accel ]]; then
	accel=tcg
	if [[ -e /dev/kvm ]] && { exec 3<>/dev/kvm; } 2>/dev/null; then
		exec 3>&-
		accel=kvm
	fi
fi
case $accel in
kvm | tcg) ;;
*) fail "WBD_VM_ACCEL must be kvm or tcg, not $accel" ;;
esac

LOG=$T/serial.log
TIMEOUT=${WBD_VM_TIMEOUT:-1500}
KVM_PROBE_S=${WBD_VM_KVM_PROBE_S:-90}

# boot ACCEL: run the guest to its end; sets qemu_rc and elapsed.
boot() {
	local cpu=max
	[[ $1 == kvm ]] && cpu=host
	: >"$LOG"
	say "booting ($1, 2 vCPUs, $GUEST_MIB MiB, initramfs $(($(stat -c %s "$T/initrd.cpio") / 1048576)) MiB; serial log $LOG)"
	start=$SECONDS
	timeout -k 10 "$TIMEOUT" qemu-system-x86_64 \
		-accel "$1" -cpu "$cpu" -smp 2 -m "$GUEST_MIB" \
		-nic none -nographic -monitor none -serial "file:$LOG" -no-reboot \
		-kernel "$KDIR/vmlinuz" -initrd "$T/initrd.cpio" \
		-append "console=ttyS0 panic=-1 loglevel=4 mitigations=off" \
		</dev/null >"$T/qemu.out" 2>&1 &
	QEMU_PID=$!
	# Show the guest's steps as they come.
	tail -F -n +1 --pid="$QEMU_PID" "$LOG" 2>/dev/null |
		grep --line-buffered '^WBD-VM: ' | sed -u 's/\r$//' >&2 &
	# Under KVM a guest that has said nothing by now never will.
	kvm_silent=
	if [[ $1 == kvm && -z ${WBD_VM_ACCEL:-} ]]; then
		local waited
		for ((waited = 0; waited < KVM_PROBE_S * 10; waited++)); do
			grep -aq '^WBD-VM: ' "$LOG" 2>/dev/null && break
			kill -0 "$QEMU_PID" 2>/dev/null || break
			sleep 0.1
		done
		if ! grep -aq '^WBD-VM: ' "$LOG" 2>/dev/null &&
			kill -0 "$QEMU_PID" 2>/dev/null; then
			kvm_silent=1
			kill -TERM "$QEMU_PID" 2>/dev/null
		fi
	fi
	wait "$QEMU_PID"
	qemu_rc=$?
	QEMU_PID=
	sleep 1 # let tail print the last lines
	elapsed=$((SECONDS - start))
}

boot "$accel"
# KVM chosen here, and qemu stopped before the guest said anything (not
# a timeout), or the guest said nothing for KVM_PROBE_S: /dev/kvm opened
# but KVM does not work on this machine.
if [[ -n $kvm_silent ]]; then
	say "KVM did not work (the guest said nothing in $KVM_PROBE_S s); booting again under TCG"
	accel=tcg
	boot "$accel"
elif [[ -z ${WBD_VM_ACCEL:-} && $accel == kvm ]] && ((qemu_rc != 0 && qemu_rc != 124 && qemu_rc != 137)) &&
	! grep -aq '^WBD-VM: ' "$LOG" 2>/dev/null; then
	say "KVM did not work (qemu exit status $qemu_rc: $(tail -n 1 "$T/qemu.out" 2>/dev/null)); booting again under TCG"
	accel=tcg
	boot "$accel"
fi

show_log() {
	[[ -s $T/qemu.out ]] && { echo "--- qemu ---"; cat "$T/qemu.out"; } >&2
	echo "--- serial console (last ${1:-80} lines) ---" >&2
	tail -n "${1:-80}" "$LOG" 2>/dev/null | tr -d '\r' >&2
}

# A pass is the guest's "WBD-VM: PASS" with no "WBD-VM: FAIL" anywhere
# before (or after) it.
if grep -aq '^WBD-VM: PASS' "$LOG" 2>/dev/null &&
	! grep -aq '^WBD-VM: FAIL' "$LOG" 2>/dev/null; then
	echo "PASS: $NAME ($accel, $elapsed s)"
	exit 0
fi
show_log 120
if ((qemu_rc == 124 || qemu_rc == 137)); then
	fail "the guest did not finish within $TIMEOUT s ($accel)"
fi
reason=$(grep -a '^WBD-VM: FAIL' "$LOG" 2>/dev/null | tr -d '\r' | tail -n 1)
fail "${reason:-the guest stopped without a result (qemu exit status $qemu_rc)} ($accel, $elapsed s)"
