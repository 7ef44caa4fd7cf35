#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# build-deb.sh - build wbd's Debian package (binary only, unsigned).
#
# Copies the source tree (without build directories) to a temporary
# directory, puts packaging/debian there as debian/, and runs
# dpkg-buildpackage -us -uc -b.  The .deb (and the .buildinfo and
# .changes) end up in build-deb/ at the top of the tree.  Installs
# debhelper, dpkg-dev and the build dependencies with apt-get when they
# are missing (as root, or through sudo); WBD_SKIP_DEPS=1 skips that.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$top/build-deb

SUDO=()
if ((EUID != 0)) && command -v sudo >/dev/null 2>&1; then
	SUDO=(sudo)
fi

install_missing() {
	local missing=() p status
	for p in "$@"; do
		status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
		[[ $status == installed ]] || missing+=("$p")
	done
	((${#missing[@]} == 0)) && return 0
	if ((EUID != 0)) && ((${#SUDO[@]} == 0)); then
		echo "build-deb: not root and no sudo; install these as root: ${missing[*]}" >&2
		exit 1
	fi
	echo "build-deb: installing ${missing[*]}"
	"${SUDO[@]}" apt-get update
	"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y --no-install-recommends "${missing[@]}"
}

if [[ -z ${WBD_SKIP_DEPS:-} ]]; then
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "build-deb: apt-get not found; this script builds on Debian and derivatives" >&2
		exit 1
	fi
	install_missing debhelper dpkg-dev
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/wbd-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
src=$work/wbd

# The tree as it is, uncommitted changes included, minus build output.
mkdir -p "$src"
tar -C "$top" \
	--exclude=./.git --exclude='./build*' --exclude=./debian \
	-cf - . | tar -C "$src" -xf -
cp -a "$top/packaging/debian" "$src/debian"

if [[ -z ${WBD_SKIP_DEPS:-} ]] && ! (cd "$src" && dpkg-checkbuilddeps) 2>/dev/null; then
	# The Build-Depends of debian/control that are not installed yet.
	"${SUDO[@]}" apt-get update
	"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
		apt-get build-dep -y --no-install-recommends "$src"
fi

(cd "$src" && dpkg-buildpackage -us -uc -b)

mkdir -p "$out"
shopt -s nullglob
for f in "$work"/*.deb "$work"/*.buildinfo "$work"/*.changes; do
	cp -f "$f" "$out/"
done
debs=("$out"/*.deb)
echo "build-deb: built in $out:"
for f in "${debs[@]}"; do
	echo "  $(basename "$f")"
done
