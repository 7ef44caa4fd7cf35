#!/usr/bin/env bash
# Every key the configuration loader accepts is documented: in wbd.conf(5)
# and in the commented conf/wbd.conf.  The keys are the loader's own: for
# each group, wbd -n is given a key no group has, and its answer "unknown
# key; expected one of: ..." lists the group's keys; each of them that
# takes a group (or a list of groups) is asked the same way, and so on.
# Nothing here lists the keys, so a new one cannot be forgotten.
source "${SRCDIR:?SRCDIR must name tests/ctl}/lib-ctl.sh"
: "${DOCDIR:?DOCDIR must name docs/}"
: "${CONFDIR:?CONFDIR must name conf/}"
MAN=$DOCDIR/wbd.conf.5
SHIPPED=$CONFDIR/wbd.conf
NOKEY=zzzzzzzzzzzzzzzzzzzzzzzz     # far from every key: no "did you mean"

# keys_in WRAP: the keys the loader lists for the group where WRAP (a
# config text with @ for the group's contents) puts an unknown key.
keys_in() {
	local text=${1//@/$NOKEY = 1;} out
	printf '%s\n' "$text" >"$T/probe.conf"
	out=$("$WBD" -n -c "$T/probe.conf" 2>&1 || true)
	sed -n 's/.*unknown key; expected one of: //p' <<<"$out" | tr -d ' ' | tr ',' '\n'
}

# walk PATH WRAP: print PATH.KEY for every key of the group at WRAP, and
# walk each key that takes a group or a list of groups.
walk() {
	local path=$1 wrap=$2 key inner sub
	while read -r key; do
		[[ -n $key ]] || continue
		echo "${path:+$path.}$key"
		for inner in "$key = { @ };" "$key = ( { @ } );"; do
			sub=${wrap//@/$inner}
			if [[ -n $(keys_in "$sub") ]]; then
				walk "${path:+$path.}$key" "$sub"
				break
			fi
		done
	done < <(keys_in "$wrap")
}

walk "" "@" | sort -u >"$T/keys"
(( $(wc -l <"$T/keys") > 20 )) || fail "found only these keys: $(cat "$T/keys")"
grep -qx 'writeback.devices.device' "$T/keys" ||
	fail "the walk did not reach writeback.devices: $(cat "$T/keys")"

missing=()
while read -r key; do
	leaf=${key##*.}
	# wbd.conf(5): the key as an item header (.B / .BR), or in one.
	grep -Eq "^\.(B|BR|TP \.B) ([^ ]+ )*\"?$leaf\"?( |,|$)" "$MAN" ||
		missing+=("$key: not in wbd.conf(5)")
	# conf/wbd.conf: "key =", set or commented out.
	grep -Eq "(^|[ {#(;])$leaf = " "$SHIPPED" ||
		missing+=("$key: not in conf/wbd.conf")
done <"$T/keys"
((${#missing[@]} == 0)) || fail "undocumented keys: $(printf '\n  %s' "${missing[@]}")"
log "$(wc -l <"$T/keys") keys, each in wbd.conf(5) and conf/wbd.conf"
