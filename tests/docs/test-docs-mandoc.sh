#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The manual pages are clean by mandoc's own checker: "mandoc -T lint"
# reports no error, warning or style message for wbd(8), wbd.conf(5) or
# wbctl(8).  Skipped without mandoc (scripts/install-deps.sh installs it).
set -euo pipefail
: "${DOCDIR:?DOCDIR must name docs/}"
if ! command -v mandoc >/dev/null 2>&1; then
	echo "SKIP: mandoc is not installed"
	exit 77
fi
out=$(mandoc -T lint -W style "$DOCDIR/wbd.8" "$DOCDIR/wbd.conf.5" \
	"$DOCDIR/wbctl.8" 2>&1) || true
if [[ -n $out ]]; then
	printf 'FAIL: mandoc -T lint:\n%s\n' "$out" >&2
	exit 1
fi
echo "mandoc -T lint: the three manual pages are clean"
