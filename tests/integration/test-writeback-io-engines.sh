#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# writeback.io_engine: each engine ("pwritev", "pwrite", "io_uring",
# "auto", which is pwritev) writes back the right data.  An export of 16 MiB + 1000 bytes
# (a short last page) is filled with nbdcopy (runs of 1 MiB, a window of
# them in flight with io_uring) and then written at random 4 KiB-aligned
# and unaligned offsets (runs of a page); after each FLUSH the backing file
# equals what was written.  wbctl status names the engine and counts
# writeback's CPU time.  With io_uring refused (WBD_TEST_NO_IO_URING=1, as
# under a seccomp filter) "io_uring" falls back to pwrite with a log line;
# with direct = true (O_DIRECT) io_uring writes aligned runs in flight
# together and the short last page through the read-modify-write path.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need nbdcopy cmp
need_python_nbd

SIZE=$(( (16 << 20) + 1000 ))

# json_dev KEY: the first device's KEY in wbctl status --json.
json_dev() {
	"$WBCTL" -s "$T/control.sock" status --json |
		"$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["devices"][0][sys.argv[1]])' "$1"
}

# scatter URI IMG SHADOW: random writes (aligned pages, unaligned pieces),
# one FLUSH, then the backing file must equal the shadow.
scatter() {
	"$PYTHON" - "$@" "$SIZE" <<'PY' || fail "see above"
import os, random, sys
import nbd
uri, img, shadow, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rng = random.Random(42)
h = nbd.NBD()
h.connect_uri(uri)
with open(shadow, "r+b") as sh:
    for i in range(300):
        if i % 3 == 0:
            off = rng.randrange(0, size - 1)
            n = rng.randrange(1, min(9000, size - off) + 1)
        else:
            off = rng.randrange(0, size // 4096) * 4096
            n = min(4096, size - off)
        buf = os.urandom(n)
        h.pwrite(buf, off)
        sh.seek(off)
        sh.write(buf)
    h.flush()
h.shutdown()
PY
	cmp "$3" "$2" || fail "after the scattered writes and FLUSH the backing file differs"
}

# run_engine ENGINE EXPECT [EXPORT_KEYS]: start wbd with io_engine ENGINE,
# check that status says EXPECT, copy in, scatter, compare.
run_engine() {
	local engine=$1 expect=$2 keys=${3:-} img=$T/$1.img
	rm -f "$CONF" "$img"
	_EXPORTS=("  { name = \"disk0\"; backing = \"$img\"; size = $SIZE;$keys }")
	CONF_EXTRA="writeback = { io_engine = \"$engine\"; };"
	write_config
	start_wbd
	local got
	got=$(json_dev io_engine)
	[[ $got == "$expect" ]] ||
		fail "io_engine \"$engine\": status says io_engine \"$got\", expected \"$expect\""
	head -c "$SIZE" /dev/urandom >"$T/data"
	nbdcopy --flush "$T/data" "$(uri_unix disk0)" || fail "nbdcopy into the export failed"
	cmp "$T/data" "$img" || fail "io_engine \"$engine\": after FLUSH the backing file differs"
	scatter "$(uri_unix disk0)" "$img" "$T/data"
	[[ $(stat -c %s "$img") == "$SIZE" ]] ||
		fail "io_engine \"$engine\": the backing file is $(stat -c %s "$img") bytes, expected $SIZE"
	local cpu
	cpu=$(json_dev writeback_cpu_seconds)
	"$PYTHON" -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$cpu" ||
		fail "io_engine \"$engine\": writeback_cpu_seconds is $cpu after writing back 16 MiB"
	json_dev writeback_cpu_share >/dev/null || fail "status has no writeback_cpu_share"
	"$WBCTL" -s "$T/control.sock" status | grep -q "writeback CPU [0-9.]* s" ||
		fail "wbctl status does not show writeback's CPU time"
	if [[ $engine == pwrite ]]; then
		# The engine is chosen at start: a reload says it needs a restart.
		sed -i 's/io_engine = "pwrite"/io_engine = "pwritev"/' "$CONF"
		local out
		out=$("$WBCTL" -s "$T/control.sock" reload 2>&1) || fail "wbctl reload failed: $out"
		grep -q "io_engine changed: needs a restart" <<<"$out" ||
			fail "a reload changing io_engine does not say it needs a restart: $out"
		[[ $(json_dev io_engine) == pwrite ]] || fail "the reload changed the engine in use"
	fi
	stop_wbd
	log "io_engine \"$engine\" ($expect${keys:+,$keys}): data correct, writeback CPU $cpu s"
}

run_engine pwritev pwritev
run_engine pwrite pwrite
run_engine auto pwritev
URING=pwrite
io_uring_usable && URING=io_uring

# Where the kernel refuses io_uring here already, the fallback is what runs.
if [[ $URING == io_uring ]]; then
	run_engine io_uring io_uring
else
	log "this kernel refuses io_uring: checking the fallback only"
fi

export WBD_TEST_NO_IO_URING=1
run_engine io_uring pwrite
grep -q "io_uring is not available (.*): writeback writes to files with pwrite" "$LOG" ||
	fail "the fallback from io_uring is not in the log"
unset WBD_TEST_NO_IO_URING

# O_DIRECT through io_uring, where the filesystem of $T takes O_DIRECT.
if dd if=/dev/zero of="$T/.direct-probe" bs=4096 count=1 oflag=direct status=none 2>/dev/null; then
	rm -f "$T/.direct-probe"
	run_engine io_uring "$URING" " direct = true;"
else
	log "$T does not take O_DIRECT: skipping the O_DIRECT case"
fi
check_logs_clean
