#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# install-deps.sh - install what wbd needs to build and test on Debian 12.
#
# Runs apt-get update and apt-get install as root (through sudo when run as
# another user).  Does nothing, quickly, when every package is already
# installed.  Set WBD_SKIP_DEPS=1 to skip this step entirely.
set -euo pipefail

PACKAGES=(
	# build (build-essential: dpkg-checkbuilddeps, and so the package
	# stage, takes it as an implicit Build-Depends)
	meson ninja-build pkg-config build-essential gcc libc6-dev
	libev-dev libconfig-dev libnbd-dev libcmocka-dev libjansson-dev libsystemd-dev
	libgnutls28-dev
	# the HTTP endpoint for Prometheus (metrics.listen)
	libmicrohttpd-dev
	# writeback through io_uring (writeback.io_engine)
	liburing-dev
	# tests: real NBD clients and servers
	nbdkit qemu-utils fio nbd-client libnbd-bin python3 python3-libnbd
	# tests: a remote that keeps to the letter of multi-conn
	# (tests/remote/weak-multiconn.py)
	nbdkit-plugin-python
	# bench/net: the round-trip filter (bench/net/delay-filter.c), and
	# the power-cut filter (tests/remote/powercut-filter.c), are built
	# against nbdkit's filter header
	nbdkit-plugin-dev
	# tests and scripts
	jq tmux procps util-linux
	# tests/service: systemd-socket-activate (socket activation),
	# systemd-sysusers and systemd-tmpfiles (the system user and its
	# directories, made in a scratch root); systemd need not run as PID 1
	systemd
	# tests: TLS certificates and PSK keys made on the fly
	gnutls-bin
	# tests: the metrics exposition read by Prometheus's own parser, the
	# HTTP endpoint scraped with curl; docs: the dashboard's picture
	python3-prometheus-client curl python3-matplotlib
	# tests: the source tree's own checks (layers, format), the manual
	# pages (mandoc -T lint)
	git clang-format mandoc
	# tests: the ThreadSanitizer build (scripts/test-tsan.sh) and fuzzing
	# (scripts/fuzz.sh): clang, libFuzzer and the sanitizer runtimes,
	# llvm-symbolizer for readable crash reports
	clang libclang-rt-dev llvm
	# tests/package: the package built (packaging/debian/control's
	# Build-Depends beyond the build's own: debhelper, which provides
	# debhelper-compat and dh-sequence-installsysusers; dpkg-dev for
	# dpkg-buildpackage; tests/tree/check-build-depends.py checks that
	# every Build-Depends is here) and checked (no lintian error or
	# warning)
	debhelper dpkg-dev lintian
	# tests: the kernel's NBD client in a VM (tests/vm): qemu, and what
	# goes into the guest's initramfs besides wbd and the kernel
	# (busybox, nbd-client, e2fsprogs; kmod's depmod/modprobe pick the
	# modules, cpio packs them)
	qemu-system-x86 busybox-static e2fsprogs kmod cpio
)

if [[ -n ${WBD_SKIP_DEPS:-} ]]; then
	echo "install-deps: WBD_SKIP_DEPS is set, not installing anything"
	exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[[ $status == installed ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
	echo "install-deps: all ${#PACKAGES[@]} packages are installed"
	exit 0
fi

echo "install-deps: installing ${missing[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-deps: apt-get not found; install these by hand: ${missing[*]}" >&2
	exit 1
fi

SUDO=()
if ((EUID != 0)); then
	if command -v sudo >/dev/null 2>&1; then
		SUDO=(sudo)
	else
		echo "install-deps: not root and no sudo; install these as root: ${missing[*]}" >&2
		exit 1
	fi
fi

# Wait for another apt (unattended-upgrades on a machine just booted, a
# second install-deps) rather than fail on its lock.
export DEBIAN_FRONTEND=noninteractive
lock=(-o DPkg::Lock::Timeout=600)
"${SUDO[@]}" apt-get "${lock[@]}" update
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get "${lock[@]}" install -y --no-install-recommends "${missing[@]}"
