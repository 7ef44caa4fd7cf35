#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Kernel-client safety: at start wbd asks for PR_SET_IO_FLUSHER and says
# whether it got it (it needs CAP_SYS_RESOURCE, which an unprivileged wbd
# lacks, and so may a root in a container).  memory = { lock = true; }
# locks wbd's memory in RAM (VmLck covers the cache, and does not fall as
# the cache fills); an unprivileged wbd whose locked-memory limit is below the
# cache is refused at start-up with one error line that says what to
# raise.  Off, nothing is locked.
source "${SRCDIR:?SRCDIR must name tests/service}/lib-service.sh"
need setpriv prlimit nbdinfo
need_python_nbd

vmlck_kib() { awk '/^VmLck:/ { print $2 }' "/proc/$1/status"; }

add_export disk0 16M rw
write_config
start_wbd
[[ $(vmlck_kib "$WBD_PID") == 0 ]] || fail "memory locked without memory.lock"
grep -Eq 'PR_SET_IO_FLUSHER (set|: not in this kernel|not permitted)' "$LOG" ||
	fail "root's wbd does not say whether PR_SET_IO_FLUSHER is set"
stop_wbd

echo 'memory = { lock = true; };' >>"$CONF"
start_wbd
grep -q 'memory.lock: wbd.s memory is locked in RAM' "$LOG" ||
	fail "no log line for memory.lock"
# AddressSanitizer's runtime makes mlockall a no-op: VmLck says nothing.
asan=
[[ $(ldd "$WBD" 2>/dev/null) == *libasan* ]] && asan=1
before=$(vmlck_kib "$WBD_PID")
"$PYTHON" - "$(uri_unix)" <<'PY' || fail "could not write through libnbd"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(b"\x33" * (8 << 20), 0)
h.shutdown()
PY
after=$(vmlck_kib "$WBD_PID")
# The cache (64 MiB) is locked, and stays so as it fills.  (The growth
# once seen here after a write was a new malloc arena, 64 MiB, not the
# cache: wbd keeps few arenas now.)
((asan || before >= 65536)) ||
	fail "VmLck is $before kB: less than the 64 MiB cache"
((asan || after >= before)) ||
	fail "VmLck fell with 8 MiB cached: $before kB, then $after kB"
log "VmLck $before kB, $after kB after 8 MiB written"
stop_wbd

# Unprivileged, with a 1 MiB locked-memory limit: refused, one line.
D=$T/nobody
chmod o+x "$T"
mkdir -m 0700 "$D"
chown nobody:nogroup "$D"
sed -e "s|$T/|$D/|g" "$CONF" >"$D/wbd.conf"
chown nobody:nogroup "$D/wbd.conf"
rc=0
prlimit --memlock=1048576 setpriv --reuid=nobody --regid=nogroup \
	--clear-groups "$WBD" -f -c "$D/wbd.conf" >"$T/nobody.log" 2>&1 || rc=$?
[[ $rc == 1 ]] || fail "an unprivileged wbd with a small MEMLOCK limit exited $rc"
grep -q 'PR_SET_IO_FLUSHER not permitted (it needs CAP_SYS_RESOURCE)' "$T/nobody.log" ||
	fail "nobody's wbd does not say PR_SET_IO_FLUSHER needs CAP_SYS_RESOURCE: $(cat "$T/nobody.log")"
[[ $(grep -c 'error:' "$T/nobody.log") == 1 ]] &&
	grep -q 'error: memory.lock: the locked-memory limit (1.0 MiB) is below' "$T/nobody.log" ||
	fail "expected one error line about the limit: $(cat "$T/nobody.log")"
log "memory.lock locks, and is refused up front when the limit is too low"
