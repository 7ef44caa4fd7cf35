#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# check-packaged-paths.sh TOP - no demo, benchmark or test takes the
# packaged service's paths: every script under tests/, bench/ and scripts/
# that writes a wbd configuration and runs wbd (-f -c) names its own
# control socket (the built-in default, /run/wbd/control.sock, is the
# packaged wbd's), and none puts a socket in /run/wbd/.  A second wbd on
# those paths would answer the service's wbctl, or keep the service from
# starting.  Exit 0 if so, 1 naming each script that does not.
set -euo pipefail
top=${1:?usage: check-packaged-paths.sh TOP}
bad=0
while IFS= read -r f; do
	rel=${f#"$top"/}
	if grep -q 'exports = (' "$f" && grep -q -- '-f -c' "$f" &&
		! grep -Eq '^[^#]*control *= *\{' "$f"; then
		echo "$rel: writes a wbd configuration without a control socket" >&2
		bad=1
	fi
	if grep -Eq '(socket|unix) *= *\[? *\\?"/run/wbd/' "$f"; then
		echo "$rel: puts a socket in /run/wbd/, the packaged service's" >&2
		bad=1
	fi
done < <(find "$top/tests" "$top/bench" "$top/scripts" -name '*.sh' \
	-not -path '*/fuzz/*' -not -path '*/tree/*' | sort)
((bad == 0)) && echo "no script takes the packaged service's paths"
exit "$bad"
