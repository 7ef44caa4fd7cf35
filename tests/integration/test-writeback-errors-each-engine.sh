#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A failing write keeps its data dirty and is reported, whatever
# writeback.io_engine writes it ("pwritev", "pwrite", "io_uring"; the
# io_uring one through the ring's completions).  wbd runs with a file size
# limit of 4 MiB (RLIMIT_FSIZE, SIGXFSZ ignored) on a 16 MiB backing file
# made beforehand, so that writeback of the first 4 MiB succeeds and of
# anything past it fails with EFBIG: the FLUSH fails, wbctl status counts
# errors and keeps the failed data dirty, and the first 4 MiB are on the
# file.  wbctl status names the engine that ran: io_uring where this
# kernel gives wbd one (else it falls back to pwrite, and the io_uring
# pass says so).
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need cmp
need_python_nbd

URING=pwrite
if io_uring_usable; then
	URING=io_uring
else
	log "this kernel refuses io_uring: the io_uring pass runs the fallback, pwrite"
fi

REAL_WBD=$WBD
cat >"$T/wbd-fsize" <<WRAP
#!/usr/bin/env bash
trap '' XFSZ
ulimit -f 4096
exec "$REAL_WBD" "\$@"
WRAP
chmod +x "$T/wbd-fsize"
WBD=$T/wbd-fsize

for engine in pwritev pwrite io_uring; do
	img=$T/$engine.img
	rm -f "$CONF"
	truncate -s 16M "$img"
	_EXPORTS=("  { name = \"disk0\"; backing = \"$img\"; size = \"16M\"; }")
	CONF_EXTRA="writeback = { io_engine = \"$engine\"; dirty_writeback_centisecs = 0; };"
	write_config
	start_wbd
	head -c 8M /dev/urandom >"$T/data"
	"$PYTHON" - "$(uri_unix disk0)" "$T/data" <<'PY' || fail "io_engine $engine: see above"
import sys
import nbd
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(open(sys.argv[2], "rb").read(), 0)
try:
    h.flush()
except nbd.Error as e:
    print("FLUSH failed as expected:", e.string, file=sys.stderr)
else:
    sys.exit("FAIL: FLUSH succeeded with writes past the file size limit")
h.shutdown()
PY
	want=$engine
	[[ $engine == io_uring ]] && want=$URING
	"$WBCTL" -s "$T/control.sock" status --json >"$T/status.json"
	"$PYTHON" - "$T/status.json" "$engine" "$want" <<'PY' || fail "io_engine $engine: see above"
import json, sys
st = json.load(open(sys.argv[1]))
dev, ex = st["devices"][0], st["exports"][0]
if dev["io_engine"] != sys.argv[3]:
    sys.exit("FAIL: status says io_engine %r, expected %r"
             % (dev["io_engine"], sys.argv[3]))
left = ex["dirty_bytes"] + ex["writeback_bytes"]
if dev["errors"] < 1:
    sys.exit("FAIL: no writeback error counted: %r" % dev)
if left < 4 << 20:
    sys.exit("FAIL: %d bytes still dirty, expected the 4 MiB past the limit" % left)
print("%s (status: %s): %d errors, %d bytes still dirty, last error %s" %
      (sys.argv[2], dev["io_engine"], dev["errors"], left, dev["last_error"]),
      file=sys.stderr)
PY
	cmp -n $((4 << 20)) "$T/data" "$img" ||
		fail "io_engine $engine: the first 4 MiB are not on the backing file"
	# The data cannot be written: no drain to wait for.
	stop_wbd "$WBD_PID" KILL
done
check_logs_clean
