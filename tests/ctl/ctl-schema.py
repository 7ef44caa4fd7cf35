#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Check a wbctl --json answer against the control protocol's schema
(docs/control-protocol.md).  Usage: ctl-schema.py CMD FILE.  Exit 0 if it
matches; else print every mismatch and exit 1.

An answer's "ok" is true; an error's (CMD "error") is false, and it has a
code and a message.  The lists of exports, devices, tunables, flushed
exports and changed keys must not be empty: every caller asks a daemon
that has exports (an empty list would pass every per-item check)."""
import json
import sys

INT, STR, BOOL, NULL = "int", "str", "bool", "null"


class NonEmpty(list):
    """A list schema whose value must hold at least one item."""


SCHEMAS = {
    "version": {"ok": BOOL, "v": INT, "daemon_version": STR, "protocol": INT},
    "exports": {"ok": BOOL, "v": INT, "exports": NonEmpty([{
        "name": STR, "description": (STR, NULL), "size_bytes": INT,
        "readonly": BOOL, "cache_mode": STR, "device": STR}])},
    "tune": {"ok": BOOL, "v": INT, "tunables": NonEmpty([{
        "key": STR, "value": (INT, STR, NULL), "unit": STR, "scope": STR,
        "description": STR}])},
    "tune-set": {"ok": BOOL, "v": INT, "changed": NonEmpty([STR])},
    "flush": {"ok": BOOL, "v": INT, "flushed": NonEmpty([STR])},
    "reload": {"ok": BOOL, "v": INT, "message": STR},
    "metrics": {"ok": BOOL, "v": INT, "content_type": STR, "text": STR},
    "error": {"ok": BOOL, "v": INT, "code": STR, "error": STR},
    "status": {
        "ok": BOOL, "v": INT, "daemon_version": STR, "pid": INT,
        "uptime_s": INT,
        "cache": {"size_bytes": INT, "page_size": INT, "used_bytes": INT,
                  "dirty_bytes": INT, "writeback_bytes": INT, "hits": INT,
                  "misses": INT, "evictions": INT, "readahead_bytes": INT,
                  "readahead_hits": INT, "zero_copy_bytes": INT,
                  "zero_copy_refused": INT, "prefaulted_bytes": INT},
        "thresholds": {"dirty_background_bytes": INT, "dirty_bytes": INT,
                       "dirty_background_ratio": (INT, NULL),
                       "dirty_ratio": (INT, NULL),
                       "dirty_expire_centisecs": INT,
                       "dirty_writeback_centisecs": INT},
        "exports": NonEmpty([{
            "name": STR, "size_bytes": INT, "cache_mode": STR,
            "readonly": BOOL, "device": STR, "cached_bytes": INT,
            "dirty_bytes": INT, "oldest_dirty_age_ms": INT,
            "connections": INT, "writeback_errors": INT,
            "state": STR, "writeback_bytes": INT,
            "at_risk_bytes": INT, "flushes": INT,
            "flush_p50_us": INT, "flush_p99_us": INT,
            "paced_writes": INT, "held_writes": INT,
            "paced_now": INT, "pause_ms": INT,
            "journal": ({
                "path": STR, "mode": STR, "broken": BOOL, "stale": BOOL,
                "size_bytes": INT, "used_bytes": INT, "records": INT,
                "oldest_seq": INT, "next_seq": INT, "commits": INT,
                "shared_flushes": INT, "fallbacks": INT,
                "last_fallback": (STR, NULL), "logged_bytes": INT,
                "log_avg_us": INT, "backing_avg_us": INT, "reclaims": INT,
                "replay": {"records": INT, "bytes": INT, "first_seq": INT,
                           "last_seq": INT, "end_offset": INT, "end": STR,
                           "dropped_records": INT, "ms": INT}}, NULL),
            "access": {"allow": ([STR], NULL), "tls_required": BOOL}}]),
        "requests": {"flushes": INT, "flush_p50_us": INT, "flush_p99_us": INT,
                     "paced_writes": INT, "held_writes": INT,
                     "paced_now": INT, "pause_ms": INT},
        "devices": NonEmpty([{
            "device": STR, "exports": NonEmpty([STR]), "dirty_bytes": INT,
            "writeback_bytes": INT,
            "workers": {"threads": INT, "busy": INT, "min": INT, "max": INT},
            "queued": {"total": INT, "background": BOOL, "flush": INT,
                       "fua": INT, "sync": INT, "read": INT,
                       "periodic": BOOL},
            "written_bytes": INT, "read_bytes": INT,
            "bandwidth_bytes_per_s": INT,
            "min_ratio": INT, "max_ratio": INT, "errors": INT,
            "last_error": (STR, NULL), "backoff_ms": INT,
            "backing": STR}]),
        "waiting_exports": [{"name": STR, "backing": STR, "attempts": INT,
                             "since_unix_ms": INT}],
        "limits": {"max_connections": INT, "max_connections_per_client": INT,
                   "idle_timeout_s": INT, "stall_timeout_s": INT,
                   "stalled": INT, "max_request_bytes": INT,
                   "connections": INT, "clients": INT, "refused": INT,
                   "reserved_connections": INT,
                   "local_idle_timeout_s": INT, "idle_closed": INT},
        "run_as": {"uid": INT, "gid": INT, "user": (STR, NULL),
                   "group": (STR, NULL)},
        "listeners": NonEmpty([{"kind": STR, "address": STR,
                                "idle_timeout_s": (INT, NULL)}]),
        "shutdown": {"stopping": BOOL, "draining": BOOL, "draining_s": INT,
                     "left_bytes": INT, "exports_left": INT},
        "memory": {"rss_bytes": INT, "malloc_in_use_bytes": INT,
                   "malloc_free_bytes": INT, "buffers_kept": INT,
                   "buffers_kept_bytes": INT,
                   "buffers_kept_max_bytes": INT},
    },
}

def kind_of(v):
    if v is None:
        return NULL
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, int):
        return INT
    if isinstance(v, str):
        return STR
    return type(v).__name__

def check(schema, v, path, errs):
    if isinstance(schema, dict):
        if not isinstance(v, dict):
            errs.append("%s: expected an object, got %r" % (path, v))
            return
        for k, s in schema.items():
            if k not in v:
                errs.append("%s.%s: missing" % (path, k))
            else:
                check(s, v[k], "%s.%s" % (path, k), errs)
    elif isinstance(schema, list):
        if not isinstance(v, list):
            errs.append("%s: expected a list, got %r" % (path, v))
            return
        if isinstance(schema, NonEmpty) and not v:
            errs.append("%s: empty, expected at least one item" % path)
        for i, item in enumerate(v):
            check(schema[0], item, "%s[%d]" % (path, i), errs)
    elif isinstance(schema, tuple) and isinstance(v, (list, dict)):
        # One of several: the list or object schema among them.
        for s in schema:
            if isinstance(s, type(v)):
                return check(s, v, path, errs)
        errs.append("%s: expected %s, got %r" % (path, schema, v))
    else:
        kinds = schema if isinstance(schema, tuple) else (schema,)
        if kind_of(v) not in kinds:
            errs.append("%s: expected %s, got %r" % (path, "/".join(kinds), v))
        elif kind_of(v) == INT and v < 0:
            errs.append("%s: negative: %r" % (path, v))

def main():
    cmd, fname = sys.argv[1], sys.argv[2]
    with open(fname) as f:
        text = f.read()
    try:
        v = json.loads(text)
    except ValueError as e:
        print("not one JSON document: %s\n%s" % (e, text))
        return 1
    errs = []
    check(SCHEMAS[cmd], v, cmd, errs)
    if cmd == "error":
        if v.get("ok") is not False:
            errs.append("error.ok: not false")
        for k in ("code", "error"):
            if not v.get(k):
                errs.append("error.%s: empty" % k)
    elif v.get("ok") is not True:
        errs.append("%s.ok: not true" % cmd)
    if v.get("v") != 1:
        errs.append("%s.v: not 1" % cmd)
    for e in errs:
        print("schema: " + e)
    return 1 if errs else 0

sys.exit(main())
