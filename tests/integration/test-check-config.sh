#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# wbd -n (--check-config) prints "configuration OK" and exits 0 for a good
# file, and for a bad one prints FILE:LINE and what was expected and exits 1;
# --help and --version work; an unknown option is refused.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need nbdinfo

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
# Write logs: a relative path, an unknown mode, too small, on a read-only
# export, one path for two exports -- each at its own line.
bad_config journal-relative-path 3 "listen = { unix = [ \"$T/s\" ]; };
exports = ( { name = \"x\"; backing = \"$B\"; size = \"1M\";
  journal = { path = \"x.wal\"; }; } );"
grep -q 'expected path = "/absolute/path"' <<<"$OUT" || fail "journal-relative-path: $OUT"
bad_config journal-bad-mode 4 "listen = { unix = [ \"$T/s\" ]; };
exports = ( { name = \"x\"; backing = \"$B\"; size = \"1M\";
  journal = { path = \"$T/x.wal\";
    mode = \"sometimes\"; }; } );"
grep -q 'expected "on-flush" or "on-write", got "sometimes"' <<<"$OUT" || fail "journal-bad-mode: $OUT"
bad_config journal-ordered-not-bool 4 "listen = { unix = [ \"$T/s\" ]; };
exports = ( { name = \"x\"; backing = \"$B\"; size = \"1M\";
  journal = { path = \"$T/x.wal\";
    ordered = \"yes\"; }; } );"
bad_config journal-too-small 3 "listen = { unix = [ \"$T/s\" ]; };
exports = ( { name = \"x\"; backing = \"$B\"; size = \"1M\";
  journal = { path = \"$T/x.wal\"; size = \"64K\"; }; } );"
bad_config journal-read-only 3 "listen = { unix = [ \"$T/s\" ]; };
exports = ( { name = \"x\"; backing = \"$B\"; size = \"1M\"; readonly = true;
  journal = { path = \"$T/x.wal\"; }; } );"
bad_config journal-shared 4 "listen = { unix = [ \"$T/s\" ]; };
exports = (
  { name = \"x\"; backing = \"$B\"; size = \"1M\"; journal = { path = \"$T/x.wal\"; }; },
  { name = \"y\"; backing = \"$B.2\"; size = \"1M\"; journal = { path = \"$T/x.wal\"; }; }
);"
grep -q 'no other export uses' <<<"$OUT" || fail "journal-shared: $OUT"
# Logs of journal.dir whose names differ only in case are one file on a
# case-insensitive file system: refused at the second export, naming both.
bad_config journal-dir-case 5 "listen = { unix = [ \"$T/s\" ]; };
journal = { dir = \"$T/wal\"; };
exports = (
  { name = \"Disk\"; backing = \"$B\"; size = \"1M\"; },
  { name = \"disk\"; backing = \"$B.2\"; size = \"1M\"; }
);"
grep -q 'got "disk" ('"$T"'/wal/disk.wal) and "Disk" (line 4, '"$T"'/wal/Disk.wal): a case-insensitive file system' <<<"$OUT" ||
	fail "journal-dir-case: $OUT"
# Unless the file names differ anyway: names cut at 180 bytes end with a
# hash of the whole name, which case changes.
long=$(printf 'x%.0s' {1..200})
printf '%s\n' "listen = { unix = [ \"$T/s\" ]; };
journal = { dir = \"$T/wal\"; };
exports = (
  { name = \"${long}A\"; backing = \"$B\"; size = \"1M\"; },
  { name = \"${long}a\"; backing = \"$B.2\"; size = \"1M\"; }
);" >"$T/journal-dir-case-cut.conf"
check 0 -n -c "$T/journal-dir-case-cut.conf"
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

# An export larger than the largest file offset (8E) could never be
# opened; a control socket group that does not exist could not be given
# the socket.
bad_config export-beyond-offsets 3 "listen = { unix = [ \"$T/s\" ]; };
exports = (
  { name = \"x\"; backing = \"$B\"; size = \"15E\"; }
);"
grep -q "below 8E" <<<"$OUT" || fail "export of 15E: expected the reason, got: $OUT"
bad_config cache-size-overflows 2 "listen = { unix = [ \"$T/s\" ]; };
cache = { size = \"16E\"; };
exports = ( { name = \"x\"; backing = \"$B\"; size = \"1M\"; } );"
grep -q "below 16E" <<<"$OUT" || fail "cache of 16E: expected the reason, got: $OUT"
nogroup=wbd-no-such-group-$$
getent group "$nogroup" >/dev/null && skip "group $nogroup exists"
bad_config control-group-missing 3 "listen = { unix = [ \"$T/s\" ]; };
control = { socket = \"$T/c\";
  group = \"$nogroup\"; };
exports = ( { name = \"x\"; backing = \"$B\"; size = \"1M\"; } );"

# What may start but is unwise is accepted with a warning that names the
# line: a cache above 75% of the machine's memory, an admin group that
# does not exist (only root may then change settings).
# good_with_warning NAME LINE CONTENT REGEX
good_with_warning() {
	local name=$1 line=$2 file=$T/$1.conf
	printf '%s\n' "$3" >"$file"
	check 0 -n -c "$file"
	grep -q 'configuration OK' <<<"$OUT" &&
		grep -q "warning: $file:$line: .*$4" <<<"$OUT" ||
		fail "config '$name': expected OK and a warning at $file:$line, got: $OUT"
	log "config '$name': $OUT"
}
good_with_warning cache-most-of-memory 2 "listen = { unix = [ \"$T/s\" ]; };
cache = { size = \"90%\"; };
exports = ( { name = \"x\"; backing = \"$B\"; size = \"1M\"; } );" \
	"more than 75% of this machine's memory"
good_with_warning admin-group-missing 3 "listen = { unix = [ \"$T/s\" ]; };
control = { socket = \"$T/c\";
  admin_group = \"$nogroup\"; };
exports = ( { name = \"x\"; backing = \"$B\"; size = \"1M\"; } );" \
	"only root may change settings"
check 0 -n -c "$CONF"
grep -q warning <<<"$OUT" && fail "a plain config got a warning: $OUT"

# What the check accepts starts: 300 exports on one device (one file
# system) -- a device used to take 256 -- serve, the last one too.
many="listen = { unix = [ \"$T/many.sock\" ]; };
cache = { size = \"16M\"; };
control = { socket = \"none\"; };
exports = ("
for ((i = 0; i < 300; i++)); do
	many+="
  { name = \"d$i\"; backing = \"$T/d$i.img\"; size = \"1M\"; },"
done
printf '%s\n);\n' "${many%,}" >"$T/many.conf"
check 0 -n -c "$T/many.conf"
spawn_wbd "$T/many.conf" "$T/many.log"
wait_ready "$SPAWNED_PID" "$T/many.sock" "" "$T/many.log"
nbdinfo --size "$(uri_unix d299 "$T/many.sock")" >/dev/null ||
	fail "export d299 of 300 on one device does not serve"
stop_wbd "$SPAWNED_PID"
((EXIT_STATUS == 0)) || fail "wbd with 300 exports exited with $EXIT_STATUS"

# A start-up failure names its cause, not only "start-up failed".
printf 'listen = { unix = [ "%s" ]; };\ncontrol = { socket = "none"; };\nexports = ( { name = "x"; backing = "%s"; size = "1M"; } );\n' \
	"$T/fail.sock" "$T/no-such-dir/x.img" >"$T/fail.conf"
check 1 -n -c "$T/fail.conf"
grep -q "fail.conf:3: .*no-such-dir" <<<"$OUT" ||
	fail "wbd -n: expected the missing directory with FILE:LINE, got: $OUT"
check 1 -f -c "$T/fail.conf"
grep -q "error: .*no-such-dir" <<<"$OUT" ||
	fail "a failed start-up: expected its cause (the backing's directory), got: $OUT"

# Every message names the file as given on the command line (here a
# relative path), at the line of the setting at fault, whether the file's
# text is wrong or what it names on this host: a backing in a directory
# that does not exist is reported at its backing line, not at the line
# where its export opens; a size wbd cannot parse, at its size line; a
# setting in an @include'd file, in that file, named as written there.
mkdir "$T/rel"
where_conf() {
	cat >"$T/rel/where.conf" <<EOF
listen = { unix = [ "$T/s" ]; };
control = { socket = "none"; };
exports = (
  {
    name = "x";
    backing = "$1";
    size = "$2";
  }
);
EOF
}
# where WANT ARGS...: wbd, run in $T, exits 1 and says exactly WANT.
where() {
	local want=$1
	shift
	pushd "$T" >/dev/null
	check 1 "$@"
	popd >/dev/null
	[[ $OUT == "$want" ]] || fail "wbd $*: expected \"$want\", got \"$OUT\""
	log "wbd $*: $OUT"
}
where_conf "$T/no-such-dir/x.img" 1M
where "wbd: rel/where.conf:6: exports[0].backing: directory $T/no-such-dir does not exist" \
	-n -c rel/where.conf
where_conf "$B" 12Q
where "wbd: rel/where.conf:7: exports[0].size: expected a size such as \"512M\" or \"10G\", got \"12Q\"" \
	-n -c rel/where.conf
printf 'listen = { unix = [ "%s/s" ]; };\ncontrol = { socket = "none"; };\n@include "exports.inc"\n' \
	"$T" >"$T/rel/includer.conf"
printf 'exports = (\n  { name = "x";\n    backing = "%s"; size = "1M"; }\n);\n' \
	"$T/no-such-dir/x.img" >"$T/rel/exports.inc"
where "wbd: exports.inc:3: exports[0].backing: directory $T/no-such-dir does not exist" \
	-n -c rel/includer.conf

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
