#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A reload that changes an export's allow list applies it to every
# connection that asks for the export from then on (the new client, and
# one still in its handshake), while a client already connected keeps
# its connection; wbctl reload says the list changed.  Removing the list
# opens the export to everyone again.  wbctl status shows the list as it
# stands each time.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export_allow d 4M 127.0.0.2
start_wbd
CTL=$T/control.sock

# The new file, written by the Python client between its steps.
allow_conf() {
	sed "s|allow = \[.*\];|allow = [ $1 ];|" "$CONF"
}
allow_conf '"127.0.0.1"' >"$T/to-one.conf"
sed 's| allow = \[.*\];||' "$CONF" >"$T/no-allow.conf"
grep -q 'allow = ' "$T/no-allow.conf" && fail "could not write a config without allow"

"$PYTHON" - "$SRCDIR" "$PORT" "$CONF" "$T" "$WBCTL" "$CTL" "$WBD_PID" \
	>"$T/py.out" 2>&1 <<'EOF' || { cat "$T/py.out"; fail "see above"; }
import json, os, shutil, signal, socket, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
import nbd
from nbdraw import Raw, CaseFailed, OPT_GO, REP_ACK, REP_ERR, repname

port, conf, tdir, wbctl, ctl, pid = (int(sys.argv[2]), sys.argv[3],
                                     sys.argv[4], sys.argv[5], sys.argv[6],
                                     int(sys.argv[7]))
ERR_POLICY = REP_ERR | 2

def tcp(src):
    s = socket.socket()
    s.settimeout(20)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s

def handle(src):
    h = nbd.NBD()
    h.set_export_name("d")
    h.connect_socket(tcp(src).detach())
    return h

def opens(src):
    try:
        h = handle(src)
        h.pread(512, 0)
        h.shutdown()
        return True
    except nbd.Error:
        return False

def check(cond, what):
    if not cond:
        raise CaseFailed(what)
    print("ok  ", what)

def reload_with(path):
    shutil.copy(path, conf)
    out = subprocess.run([wbctl, "-s", ctl, "reload"], capture_output=True,
                         text=True, timeout=60)
    print("wbctl reload:", out.stdout.strip(), out.stderr.strip())
    if out.returncode != 0:
        raise CaseFailed("wbctl reload failed")
    return out.stdout

def shown():
    """The allow list wbctl status --json shows for d, and the text line."""
    js = subprocess.run([wbctl, "-s", ctl, "--json", "status"], check=True,
                        capture_output=True, text=True, timeout=30).stdout
    d = [e for e in json.loads(js)["exports"] if e["name"] == "d"][0]
    text = subprocess.run([wbctl, "-s", ctl, "status"], check=True,
                          capture_output=True, text=True, timeout=30).stdout
    line = [l.strip() for l in text.splitlines() if l.strip().startswith("d:")]
    return d["access"]["allow"], line

check(shown() == (["127.0.0.2"], ["d: allow 127.0.0.2"]),
      "wbctl status shows the list: %r" % (shown(),))
check(opens("127.0.0.2") and not opens("127.0.0.1"), "before: 127.0.0.2 only")
kept = handle("127.0.0.2")              # in transmission across the reload
kept.pwrite(b"\xab" * 4096, 0)
haggling = Raw.__new__(Raw)             # in its handshake across it
haggling.s, haggling.structured = tcp("127.0.0.2"), False
haggling.greeting()

out = reload_with(os.path.join(tdir, "to-one.conf"))
check('export "d": allow list changed' in out, "wbctl reload names the change")
check(opens("127.0.0.1"), "after: 127.0.0.1 is let in")
check(not opens("127.0.0.2"), "after: a new client from 127.0.0.2 is refused")
check(shown() == (["127.0.0.1"], ["d: allow 127.0.0.1"]),
      "wbctl status shows the new list: %r" % (shown(),))
rtype, _ = haggling.go("d")
check(rtype == ERR_POLICY, "a client still haggling gets the new list: %s"
      % repname(rtype))
kept.pwrite(b"\xcd" * 4096, 4096)
kept.flush()
check(kept.pread(8192, 0) == b"\xab" * 4096 + b"\xcd" * 4096,
      "the client connected before keeps reading and writing")
kept.shutdown()

# No allow list: everyone again; this time by SIGHUP.
shutil.copy(os.path.join(tdir, "no-allow.conf"), conf)
os.kill(pid, signal.SIGHUP)
deadline = time.monotonic() + 30
while not opens("127.0.0.2"):
    if time.monotonic() > deadline:
        raise CaseFailed("127.0.0.2 still refused 30 s after SIGHUP")
    time.sleep(0.1)
check(opens("127.0.0.1") and opens("127.0.0.5"), "no list: everyone")
check(shown() == (None, []), "wbctl status shows no list: %r" % (shown(),))
EOF
cat "$T/py.out" >&2
grep -q 'reload: .*export "d": allow list changed (for new connections)' "$LOG" ||
	fail "the log does not say the allow list changed"
assert_alive
