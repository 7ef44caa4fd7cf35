#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# wbctl's bash completion: commands and options, the running daemon's
# exports after "flush" and its tunables (KEY=) after "tune", through the
# socket given with -s.
source "${SRCDIR:?SRCDIR must name tests/service}/lib-service.sh"
: "${PKGDIR:?PKGDIR must name packaging/}"

add_export disk0 16M rw
add_export iso 16M ro
start_wbd

PATH=$(dirname "$WBCTL"):$PATH
# shellcheck disable=SC1091
source "$PKGDIR/wbctl.bash-completion"

# complete WORDS...: COMPREPLY for the command line WORDS, the last one
# being completed; prints one candidate a line.
complete_words() {
	COMP_WORDS=("$@")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMPREPLY=()
	_wbctl
	printf '%s\n' "${COMPREPLY[@]}" | sort
}

[[ $(complete_words wbctl re) == reload ]] || fail "wbctl re<TAB>: $(complete_words wbctl re)"
grep -qx -- --json <(complete_words wbctl --j) || fail "wbctl --j<TAB>"
got=$(complete_words wbctl -s "$CTL" flush "")
grep -qx disk0 <<<"$got" && grep -qx iso <<<"$got" && grep -qx -- --all <<<"$got" ||
	fail "wbctl -s CTL flush <TAB>: $got"
got=$(complete_words wbctl --socket="$CTL" tune dirty_b)
[[ $got == $'dirty_background_bytes=\ndirty_background_ratio=\ndirty_bytes=' ]] ||
	fail "wbctl tune dirty_b<TAB>: $got"
got=$(complete_words wbctl -s "$CTL" tune export.)
grep -qx 'export.disk0.cache_mode=' <<<"$got" || fail "wbctl tune export.<TAB>: $got"
# No daemon: the commands still complete, nothing else breaks.
got=$(complete_words wbctl -s "$T/none.sock" flush "")
grep -qx -- --all <<<"$got" || fail "flush <TAB> without a daemon: $got"
log "commands, options, exports and tunables complete"
