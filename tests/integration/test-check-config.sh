#!/usr/bin/env bash
# wbd -n (--check-config) prints "configuration OK" and exits 0 for a good
# file, and for a bad one prints FILE:LINE and what was expected and exits 1;
# --help and --version work; an unknown option is refused.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"

add_export disk0 64M rw "scratch disk"
add_export ro 16M ro
write_config

# check EXPECTED_STATUS ARGS...: run wbd, capture stdout+stderr in $OUT.
OUT=
check() {
	local want=$1 rc=0
	shift
	OUT=$(timeout 20 "$WBD" "$@" 2>&1) || rc=$?
	[[ $rc == "$want" ]] || fail "wbd $*: expected exit $want, got $rc: $OUT"
}

log "good config"
check 0 -n -c "$CONF"
grep -q 'configuration OK' <<<"$OUT" || fail "wbd -n: expected 'configuration OK', got: $OUT"
check 0 --check-config -c "$CONF"
grep -q 'configuration OK' <<<"$OUT" || fail "wbd --check-config: expected 'configuration OK', got: $OUT"

# bad_config NAME LINE CONTENT: CONTENT is refused with NAME:LINE in the message.
bad_config() {
	local name=$1 line=$2 file=$T/$1.conf
	printf '%s\n' "$3" >"$file"
	check 1 -n -c "$file"
	grep -q "$file:$line" <<<"$OUT" ||
		fail "bad config '$name': expected '$file:$line' in the message, got: $OUT"
	log "bad config '$name': $OUT"
}

B=$T/b.img
bad_config syntax-error 3 "listen = { unix = [ \"$T/s\" ]; };
exports = (
  { name = \"x\"; backing = \"$B\"; size = ; }
);"
bad_config bad-size 3 "listen = { unix = [ \"$T/s\" ]; };
exports = (
  { name = \"x\"; backing = \"$B\"; size = \"12Q\"; }
);"
bad_config missing-backing 4 "listen = { unix = [ \"$T/s\" ]; };
# comment
exports = (
  { name = \"x\"; size = \"1M\"; }
);"
bad_config wrong-type 2 "listen = { unix = [ \"$T/s\" ]; };
exports = ( { name = \"x\"; backing = \"$B\"; size = \"1M\"; readonly = \"maybe\"; } );"
bad_config duplicate-export 4 "listen = { unix = [ \"$T/s\" ]; };
exports = (
  { name = \"x\"; backing = \"$B\"; size = \"1M\"; },
  { name = \"x\"; backing = \"$B.2\"; size = \"1M\"; }
);"
bad_config bad-listen-address 1 "listen = { tcp = [ \"127.0.0.1:notaport\" ]; };
exports = ( { name = \"x\"; backing = \"$B\"; size = \"1M\"; } );"

# What could never start is refused by the check, not at start-up: a cache
# larger than the machine's memory (or a size that overflows), more
# exports than the export table holds.
bad_config cache-beyond-memory 2 "listen = { unix = [ \"$T/s\" ]; };
cache = { size = \"15E\"; };
exports = ( { name = \"x\"; backing = \"$B\"; size = \"1M\"; } );"
grep -q "at most this machine's memory" <<<"$OUT" ||
	fail "cache larger than memory: expected the reason, got: $OUT"
many="listen = { unix = [ \"$T/s\" ]; };
exports = ("
for ((i = 0; i < 1025; i++)); do
	many+="
  { name = \"e$i\"; backing = \"$T/e$i.img\"; size = \"1M\"; },"
done
bad_config too-many-exports 2 "${many%,}
);"
grep -q "at most 1024 exports, got 1025" <<<"$OUT" ||
	fail "1025 exports: expected the reason, got: $OUT"

# Export names are UTF-8 (the protocol's strings are, and wbctl's JSON):
# a name that is not is refused with its line.
printf 'listen = { unix = [ "%s/s" ]; };\nexports = (\n  { name = "bad\xff"; backing = "%s"; size = "1M"; }\n);\n' \
	"$T" "$B" >"$T/not-utf8.conf"
check 1 -n -c "$T/not-utf8.conf"
grep -q "not-utf8.conf:3" <<<"$OUT" && grep -q "UTF-8" <<<"$OUT" ||
	fail "a name not in UTF-8: expected FILE:3 and the reason, got: $OUT"

# An @include that names no readable regular file ("" or "." name the
# directory) is refused with its line: libconfig 1.5 calls exit() on one,
# which would end a running wbd mid-reload with dirty data cached.
bad_config include-directory 2 "io_threads = 2;
@include \".\"
exports = ( { name = \"x\"; backing = \"$B\"; size = \"1M\"; } );"
bad_config include-empty 2 "io_threads = 2;
@include \"\"
exports = ( { name = \"x\"; backing = \"$B\"; size = \"1M\"; } );"

log "missing file"
check 1 -n -c "$T/does-not-exist.conf"
grep -q "does-not-exist.conf" <<<"$OUT" || fail "missing config: the message does not name the file: $OUT"

log "--help, --version, unknown option"
check 0 --help
grep -qi 'usage' <<<"$OUT" || fail "wbd --help: no usage text: $OUT"
grep -q -- '-c' <<<"$OUT" || fail "wbd --help does not mention -c: $OUT"
check 0 --version
grep -Eq '[0-9]+\.[0-9]+' <<<"$OUT" || fail "wbd --version: no version number: $OUT"
OUT=$("$WBD" --no-such-option 2>&1) && fail "wbd --no-such-option exited 0: $OUT"

# Checking a config starts nothing: the socket is not created.
[[ ! -e $SOCK ]] || fail "wbd -n created $SOCK"
