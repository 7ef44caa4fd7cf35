#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Each command's usage line ("wbctl help CMD", and the one a usage error
# prints) names every option its parser accepts, and accepts every option
# it names; the options its help lists are the ones it accepts; wbctl(8)'s
# SYNOPSIS names them too.  The same for wbctl's global options and
# "wbctl --help".  What a parser accepts is found by trying it: each
# letter as a short option, and each letter as the start of a long one
# (getopt_long takes an unambiguous prefix), against a socket where no
# daemon listens, so that an accepted option ends in exit status 3 (or
# "needs an argument") and an unknown one in "unknown option" (without a
# daemon nothing waits: -w ends at once).  -h and
# --help, which every command takes, are named in wbctl --help.
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"
MAN=$SRCDIR/../../docs/wbctl.8
NONE=$T/none.sock

# accepts CMD OPTION: does CMD's parser take OPTION?  CMD "" is wbctl's
# global parser.
accepts() {
	local rc=0 err
	if [[ -z $1 ]]; then
		err=$("$WBCTL" -s "$NONE" "$2" version 2>&1 >/dev/null </dev/null) || rc=$?
	else
		err=$("$WBCTL" -s "$NONE" "$1" "$2" 2>&1 >/dev/null </dev/null) || rc=$?
	fi
	[[ $rc == 2 && $err == *"unknown option"* ]] && return 1
	return 0
}

# options HELP: "SHORT LONG" for each option line of a help text
# ("  -w, --watch[=SECS]", "      --no-wait", "  -V, --version"); "-" for a
# form that is missing.
options() {
	sed -nE 's/^ +(-([A-Za-z0-9]),? +)?(--([a-z][a-z-]*))?.*/\2 \4/p' <<<"$1" |
		awk 'NF { print ($1 ~ /^[A-Za-z0-9]$/ && NF == 2 ? $1 " " $2 : ($1 ~ /^[A-Za-z0-9]$/ ? $1 " -" : "- " $1)) }'
}

# names USAGE OPTION: the usage line names OPTION ("-w", "--json").
names() {
	grep -Eq -- "(^|[[ |])$2([] =|]|$)" <<<"$1"
}

letters=({a..z} {A..Z} {0..9})

# probe CMD: try each letter as a short option and as the start of a long
# one, all at once; set ACCEPTED[OPTION] for those CMD's parser takes.
declare -A ACCEPTED
probe() {
	local tries=() pids=() i
	for i in "${letters[@]}"; do tries+=("-$i"); done
	for i in {a..z}; do tries+=("--$i"); done
	rm -rf "$T/probe"
	mkdir "$T/probe"
	for i in "${!tries[@]}"; do
		{ accepts "$1" "${tries[$i]}" && touch "$T/probe/$i"; } &
		pids+=("$!")
	done
	wait "${pids[@]}" || true
	ACCEPTED=()
	for i in "${!tries[@]}"; do
		[[ -e $T/probe/$i ]] && ACCEPTED[${tries[$i]}]=1
	done
	return 0
}

problems=()
for cmd in "" status exports tune flush reload metrics version; do
	if [[ -z $cmd ]]; then
		expect_exit 0 "$WBCTL" --help
		help=$(sed -n '/^Options:/,/^$/p' <<<"$OUT")
		usage=$help             # the global options: listed, not in a usage line
		what="wbctl"
		syn=$(sed -n '/^\.SH SYNOPSIS/,/^\.SH/p' "$MAN")
	else
		expect_exit 0 "$WBCTL" help "$cmd"
		help=$OUT
		usage=$(sed -n '1s/^Usage: wbctl \[OPTION\]\.\.\. //p' <<<"$OUT")
		what="wbctl $cmd"
		[[ $usage == "$cmd"* ]] || fail "$what: no usage line: $OUT"
		# The usage line a usage error prints is the same.
		expect_exit 2 "$WBCTL" -s "$NONE" "$cmd" --no-such-option
		grep -qxF "Usage: wbctl $usage" <<<"$ERR" ||
			problems+=("$what: a usage error prints another usage line: $ERR")
		# This command's lines of wbctl(8)'s SYNOPSIS.
		syn=$(awk -v c="$cmd" '/^\.SY wbctl/ { block = ""; keep = 0 }
			{ block = block $0 "\n" }
			$0 == ".B " c { keep = 1 }
			/^\.YS/ && keep { printf "%s", block; keep = 0 }' "$MAN")
		[[ -n $syn ]] || problems+=("$what: not in wbctl(8)'s SYNOPSIS")
	fi
	declare -A long_of=() short_of=()
	while read -r s l; do
		[[ $s != - ]] && long_of[$s]=$l
		[[ $l != - ]] && short_of[$l]=$s
	done < <(options "$help")

	# Every short option accepted is in the help and named in the usage.
	probe "$cmd"
	for c in "${letters[@]}"; do
		[[ -n ${ACCEPTED[-$c]:-} ]] || continue
		if [[ $c == h ]]; then
			continue
		fi
		if [[ -z ${long_of[$c]+x} ]]; then
			problems+=("$what: accepts -$c, which its help does not list")
		elif ! names "$usage" "-$c" &&
		    ! { [[ ${long_of[$c]} != - ]] && names "$usage" "--${long_of[$c]}"; }; then
			problems+=("$what: accepts -$c, which its usage does not name")
		fi
	done
	# Every long option accepted (found by its first letter) is in the
	# help and named in the usage.
	for c in {a..z}; do
		[[ -n ${ACCEPTED[--$c]:-} ]] || continue
		found=
		for l in "${!short_of[@]}"; do
			[[ $l == "$c"* ]] || continue
			found=1
			[[ $l == help ]] && continue
			names "$usage" "--$l" ||
				{ [[ ${short_of[$l]} != - ]] && names "$usage" "-${short_of[$l]}"; } ||
				problems+=("$what: accepts --$l, which its usage does not name")
		done
		[[ -n $found ]] && continue
		problems+=("$what: accepts --$c..., a long option its help does not list")
		[[ $c == h ]] || grep -Eq -- "(^|[[ |])--$c" <<<"$usage" ||
			problems+=("$what: accepts --$c..., a long option its usage does not name")
	done
	# Every option the help lists is accepted; every one the usage names
	# is accepted and in wbctl(8)'s SYNOPSIS.
	for l in "${!short_of[@]}"; do
		accepts "$cmd" "--$l" || problems+=("$what: its help lists --$l, which it refuses")
	done
	for s in "${!long_of[@]}"; do
		accepts "$cmd" "-$s" || problems+=("$what: its help lists -$s, which it refuses")
	done
	if [[ -n $cmd ]]; then
		for o in $(grep -oE -- '(^|[[ |])--?[A-Za-z0-9][a-z-]*' <<<"$usage" | tr -d '[ |'); do
			accepts "$cmd" "$o" || problems+=("$what: its usage names $o, which it refuses")
			grep -qF -- "${o//-/\\-}" <<<"$syn" ||
				problems+=("$what: its usage names $o, which wbctl(8)'s SYNOPSIS does not")
		done
	fi
	unset long_of short_of
done
if ((${#problems[@]})); then
	printf '%s\n' "${problems[@]}" >&2
	fail "${#problems[@]} problem(s) with the usage lines"
fi
log "every option accepted is named in its usage line"
