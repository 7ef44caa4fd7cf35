/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * settings-table.c - the rows of the settings table (settings.h): every key
 * of wbd.conf, with its range, default and doc line, and where each group
 * lives in struct wbd_config: the groups cache, writeback, control,
 * remote, limits, tls, memory and metrics, which the loader walks
 * (conf/config-walk.c), and the keys it reads by hand within their rows'
 * bounds (the top level, listen and its listeners, the journal group, an
 * export and its journal; conf/config.c, config-listen.c,
 * config-export.c).  Constant
 * data; the code that reads it is settings.c's and the loader's.
 */
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "ctl-proto.h"
#include "settings.h"

#define WORKERS_MAX 64u
#define PAGE_SIZE_MIN 512u
#define PAGE_SIZE_MAX (1u << 20)
#define MAX_IO_BYTES_MAX (32u << 20)
#define CONTROL_SOCKET_BYTES 107u /* sun_path, less its NUL */

/* The field M of GROUP's struct, and the row's group. */
#define ROW(grp, type, m)                                                      \
	.group = #grp, .offset = offsetof(struct type, m),                     \
	.size = sizeof(((struct type *)0)->m)
#define CACHE(m) ROW(cache, cache_conf, m)
#define WB(m) ROW(writeback, writeback_conf, m)
#define CONTROL(m) ROW(control, control_conf, m)
#define REMOTE(m) ROW(remote, remote_conf, m)
#define LIMITS(m) ROW(limits, limits_conf, m)
#define MEMORY(m) ROW(memory, memory_conf, m)
#define TLS(m) ROW(tls, tls_conf, m)
#define METRICS(m) ROW(metrics, metrics_conf, m)
#define TOP(m) ROW(, wbd_config, m)
#define LISTEN(m) ROW(listen, wbd_config, m)
#define EXPORT(m) ROW(exports, export_conf, m)
#define JOURNAL(m) ROW(exports.journal, export_journal_conf, m)
#define JOURNALS(m) ROW(journal, journal_conf, m)
#define NO_FIELD(grp) .group = grp, .offset = 0, .size = 0
#define DEV_FIELD(m) .dev_offset = offsetof(struct device_conf, m)

/* enum tls_mode's names, in its order. */
static const char *const settings_tls_modes[] = { "off", "on", "require",
	NULL };
/* enum backend_io_engine's (backend.c's names), in its order. */
static const char *const settings_io_engines[] = { "auto", "pwritev", "pwrite",
	"io_uring", NULL };
/* enum cache_mode's, in its order. */
static const char *const settings_cache_modes[] = { "writeback", "writethrough",
	"writethrough-until-flush", NULL };
/* An export's tls (by hand: tls_require false, true). */
static const char *const settings_export_tls[] = { "optional", "require",
	NULL };
/* A journal's mode (enum journal_mode less JOURNAL_OFF: by hand). */
static const char *const settings_journal_modes[] = { "on-flush", "on-write",
	NULL };

#define NAME_BYTES 4096u     /* NBD's limit on names, descriptions */
#define UNIX_PATH_BYTES 107u /* sun_path, less its NUL */
#define IO_THREADS_MAX 1024u
#define IDLE_MAX_S 86400u

/* In the order of the file's "expected one of" lists and wbctl tune's. */
const struct setting settings_table[] = {
	{ CACHE(size_bytes), .name = "size", .type = SETTING_BYTES,
	    .unit = "bytes", .min = 0, .max = UINT64_MAX, .def = 256u << 20,
	    .late = true, .doc = "the cache's memory, or \"N%\" of RAM" },
	{ CACHE(page_size), .name = "page_size", .type = SETTING_POW2,
	    .unit = "bytes", .min = PAGE_SIZE_MIN, .max = PAGE_SIZE_MAX,
	    .def = 4096, .doc = "the unit of caching and of dirty tracking" },
	{ CACHE(readahead_bytes), .name = "readahead_bytes",
	    .type = SETTING_BYTES, .unit = "bytes", .min = 0,
	    .max = CACHE_MAX_READAHEAD_BYTES, .def = 4u << 20, .late = true,
	    .doc = "the most a sequential read fetches ahead (0: off)" },

	{ WB(dirty_background.ratio_pct), .name = "dirty_background_ratio",
	    .type = SETTING_RATIO, .unit = "%", .min = 0, .max = 100, .def = 10,
	    .pair = "dirty_background_bytes", .runtime = true,
	    .doc =
		"background writeback starts above this share of the cache" },
	{ WB(dirty_background.bytes), .name = "dirty_background_bytes",
	    .type = SETTING_BYTES, .unit = "bytes", .min = 1, .max = UINT64_MAX,
	    .pair = "dirty_background_ratio", .runtime = true,
	    .doc = "background writeback starts above this much dirty data" },
	{ WB(dirty.ratio_pct), .name = "dirty_ratio", .type = SETTING_RATIO,
	    .unit = "%", .min = 0, .max = 100, .def = 20, .pair = "dirty_bytes",
	    .runtime = true,
	    .doc = "writers are held at this share of the cache" },
	{ WB(dirty.bytes), .name = "dirty_bytes", .type = SETTING_BYTES,
	    .unit = "bytes", .min = 1, .max = UINT64_MAX, .pair = "dirty_ratio",
	    .runtime = true,
	    .doc = "writers are held at this much dirty data" },
	{ WB(dirty_expire_centisecs), .name = "dirty_expire_centisecs",
	    .type = SETTING_UINT, .unit = "centisecs", .min = 0, .max = INT_MAX,
	    .def = 3000, .runtime = true,
	    .doc =
		"periodic writeback writes pages dirty for longer than this" },
	{ WB(dirty_writeback_centisecs), .name = "dirty_writeback_centisecs",
	    .type = SETTING_UINT, .unit = "centisecs", .min = 0, .max = INT_MAX,
	    .def = 500, .runtime = true,
	    .doc = "how often periodic writeback runs (0: never)" },
	{ WB(min_workers), .name = "min_workers", .type = SETTING_UINT,
	    .unit = "threads", .min = 1, .max = WORKERS_MAX, .def = 1,
	    .runtime = true, .doc = "flush-MAJ:MIN threads kept per device" },
	{ WB(max_workers), .name = "max_workers", .type = SETTING_UINT,
	    .unit = "threads", .min = 1, .max = WORKERS_MAX, .def = 8,
	    .runtime = true,
	    .doc = "flush-MAJ:MIN threads at most per device" },
	{ WB(max_io_bytes), .name = "max_io_bytes", .type = SETTING_IO_BYTES,
	    .unit = "bytes", .min = PAGE_SIZE_MIN, .max = MAX_IO_BYTES_MAX,
	    .def = 1u << 20,
	    .doc = "the largest write to a backing store, merged pages" },
	{ WB(worker_spawn_ms), .name = "worker_spawn_ms", .type = SETTING_UINT,
	    .unit = "ms", .min = 1, .max = 600000, .def = 1000, .runtime = true,
	    .doc = "work waiting this long on busy workers adds a worker" },
	{ WB(worker_idle_ms), .name = "worker_idle_ms", .type = SETTING_UINT,
	    .unit = "ms", .min = 1, .max = 3600000, .def = 10000,
	    .runtime = true,
	    .doc = "a worker idle this long exits (above min_workers)" },
	{ WB(background_nice), .name = "background_nice", .type = SETTING_UINT,
	    .unit = "nice", .min = 0, .max = 19, .def = 10, .runtime = true,
	    .doc = "added to a worker's nice value while it runs background, "
		   "periodic or write-behind writeback (0: none)" },
	{ WB(min_ratio), .name = "min_ratio", .type = SETTING_RATIO,
	    .scope = SETTING_DEVICE, .unit = "%", .min = 0, .max = 100,
	    .def = 0, DEV_FIELD(min_ratio), .runtime = true,
	    .doc = "share of the dirty limit this device is guaranteed" },
	{ WB(max_ratio), .name = "max_ratio", .type = SETTING_RATIO,
	    .scope = SETTING_DEVICE, .unit = "%", .min = 1, .max = 100,
	    .def = 100, DEV_FIELD(max_ratio), .runtime = true,
	    .doc = "share of the dirty limit this device may hold" },
	{ WB(io_engine), .name = "io_engine", .type = SETTING_ENUM, .unit = "",
	    .max = 16, .names = settings_io_engines, .def = 0, .by_hand = true,
	    .doc = "how a local backing is written: the fastest found at "
		   "start, or one named" },

	{ CONTROL(socket), .name = "socket", .type = SETTING_STRING, .unit = "",
	    .min = 1, .max = CONTROL_SOCKET_BYTES,
	    .def_str = WBD_DEFAULT_CONTROL,
	    .doc = "the control socket's path, or \"none\"" },
	{ CONTROL(mode), .name = "mode", .type = SETTING_MODE, .unit = "",
	    .min = 0, .max = 0777, .def = 0660,
	    .doc = "the control socket's file mode" },
	{ CONTROL(group), .name = "group", .type = SETTING_STRING, .unit = "",
	    .min = 1, .max = 255,
	    .doc = "the control socket's group, a group of this machine" },
	{ CONTROL(admin_group), .name = "admin_group", .type = SETTING_STRING,
	    .unit = "", .min = 1, .max = 255,
	    .doc = "a group whose members may change settings, as root may" },
	{ CONTROL(max_clients), .name = "max_clients", .type = SETTING_UINT,
	    .unit = "clients", .min = 1, .max = 1024, .def = 64,
	    .doc = "control clients connected at once" },
	{ CONTROL(max_clients_per_uid), .name = "max_clients_per_uid",
	    .type = SETTING_UINT, .unit = "clients", .min = 1, .max = 1024,
	    .def = 16, .doc = "control clients of one uid at once" },
	{ CONTROL(admin_reserved), .name = "admin_reserved",
	    .type = SETTING_UINT, .unit = "clients", .min = 0, .max = 1023,
	    .def = 8,
	    .doc =
		"the last control slots, kept for root and the admin group" },
	{ CONTROL(idle_timeout_s), .name = "idle_timeout_s",
	    .type = SETTING_UINT, .unit = "s", .min = 0, .max = 86400,
	    .def = 60,
	    .doc = "a control client idle this long is closed (0: never)" },

	{ REMOTE(connect_timeout_ms), .name = "connect_timeout_ms",
	    .type = SETTING_UINT, .unit = "ms", .min = 100, .max = 600000,
	    .def = 10000, .doc = "one connection attempt to an NBD server" },
	{ REMOTE(reconnect_max_ms), .name = "reconnect_max_ms",
	    .type = SETTING_UINT, .unit = "ms", .min = 100, .max = 600000,
	    .def = 5000,
	    .doc = "the longest wait between reconnection attempts" },
	{ REMOTE(io_timeout_ms), .name = "io_timeout_ms", .type = SETTING_UINT,
	    .unit = "ms", .min = 100, .max = 3600000, .def = 30000,
	    .doc = "one request; a read waits this long for a reconnection" },
	{ REMOTE(read_connection), .name = "read_connection",
	    .type = SETTING_BOOL, .unit = "", .def = true,
	    .doc = "cache misses are read on a connection of their own" },
	{ REMOTE(write_connection), .name = "write_connection",
	    .type = SETTING_BOOL, .unit = "", .def = true,
	    .doc = "writeback's writes go on a connection of their own" },
	{ REMOTE(max_connections), .name = "max_connections",
	    .type = SETTING_UINT, .unit = "connections", .min = 1,
	    .max = REMOTE_MAX_CONNECTIONS, .def = REMOTE_MAX_CONNECTIONS,
	    .doc = "connections one export opens to its remote at most "
		   "(libnbd's and wbd's own read and write connections)" },
	{ REMOTE(unflushed_ranges), .name = "unflushed_ranges",
	    .type = SETTING_UINT, .unit = "ranges", .min = 1, .max = 65536,
	    .def = 1024,
	    .doc = "ranges written but not yet flushed, kept per export" },
	{ REMOTE(commit_interval_ms), .name = "commit_interval_ms",
	    .type = SETTING_UINT, .unit = "ms", .min = 0, .max = 60000,
	    .def = 50,
	    .doc = "writeback flushes what it wrote at most this often "
		   "(0: never)" },
	{ REMOTE(max_writeback_inflight_bytes),
	    .name = "max_writeback_inflight_bytes", .type = SETTING_BYTES,
	    .unit = "bytes", .min = 4096, .max = 1ull << 30, .def = 64u << 20,
	    .doc = "writes in flight to one remote device at most, whatever "
		   "its bandwidth and round trip" },
	{ REMOTE(min_writeback_inflight), .name = "min_writeback_inflight",
	    .type = SETTING_UINT, .unit = "writes", .min = 1,
	    .max = REMOTE_MAX_MIN_WRITEBACK_INFLIGHT,
	    .def = REMOTE_DEFAULT_MIN_WRITEBACK_INFLIGHT,
	    .doc = "writes in flight to one remote device at least, when "
		   "writeback has them, whatever its bandwidth and round "
		   "trip" },
	{ REMOTE(conn_depth), .name = "conn_depth", .type = SETTING_UINT,
	    .unit = "commands", .min = 1, .max = REMOTE_MAX_CONN_DEPTH,
	    .def = REMOTE_DEFAULT_CONN_DEPTH,
	    .doc = "commands in flight on each connection to a multi-conn "
		   "remote before another is opened" },
	{ REMOTE(write_behind), .name = "write_behind", .type = SETTING_BOOL,
	    .unit = "", .def = true,
	    .doc = "an idle remote device's dirty data is written back at "
		   "once" },
	{ REMOTE(write_behind_defer_ms), .name = "write_behind_defer_ms",
	    .type = SETTING_UINT, .unit = "ms", .min = 0, .max = 10000,
	    .def = REMOTE_DEFAULT_WRITE_BEHIND_DEFER_MS,
	    .doc = "write-behind leaves a client's pages to its next FLUSH "
		   "for this long after one (0: never)" },
	{ REMOTE(fua_max_runs), .name = "fua_max_runs", .type = SETTING_UINT,
	    .unit = "runs", .min = 0, .max = 4096,
	    .def = REMOTE_DEFAULT_FUA_MAX_RUNS,
	    .doc = "runs written back with FUA, so that the next FLUSH needs "
		   "no flush of the remote, between two FLUSHes (0: none)" },
	{ REMOTE(max_readahead_bytes), .name = "max_readahead_bytes",
	    .type = SETTING_BYTES, .unit = "bytes", .min = 4096,
	    .max = 1ull << 30, .def = 64u << 20,
	    .doc = "read-ahead on a remote grows with its round trip up to "
		   "this, and reads in flight to it are bounded by it" },

	{ LIMITS(max_connections), .name = "max_connections",
	    .type = SETTING_UINT, .unit = "connections", .min = 1,
	    .max = LIMITS_MAX_CONNECTIONS, .def = 1024,
	    .doc = "open NBD connections at once" },
	{ LIMITS(max_connections_per_client),
	    .name = "max_connections_per_client", .type = SETTING_UINT,
	    .unit = "connections", .min = 1, .max = LIMITS_MAX_CONNECTIONS,
	    .def = 64,
	    .doc = "open NBD connections of one client (address or uid)" },
	{ LIMITS(reserved_connections), .name = "reserved_connections",
	    .type = SETTING_UINT, .unit = "connections", .min = 0,
	    .max = LIMITS_MAX_CONNECTIONS - 1, .def = 64, .late = true,
	    .doc = "the last of max_connections, only for a client holding "
		   "none (unless given: at most max_connections / 16)" },
	{ LIMITS(idle_timeout_s), .name = "idle_timeout_s",
	    .type = SETTING_UINT, .unit = "s", .min = 0, .max = 86400,
	    .def = 21600,
	    .doc = "a connection of a remote client (counted by address) "
		   "that sends nothing this long is closed (0: never)" },
	{ LIMITS(local_idle_timeout_s), .name = "local_idle_timeout_s",
	    .type = SETTING_UINT, .unit = "s", .min = 0, .max = 86400, .def = 0,
	    .doc = "the same for a client of this host (counted by uid, such "
		   "as the kernel client; 0: never)" },
	{ LIMITS(stall_timeout_s), .name = "stall_timeout_s",
	    .type = SETTING_UINT, .unit = "s", .min = 0, .max = 86400,
	    .def = 120,
	    .doc = "a connection that reads no reply this long is closed "
		   "(0: never)" },
	{ LIMITS(max_inflight_bytes), .name = "max_inflight_bytes",
	    .type = SETTING_BYTES, .unit = "bytes",
	    .min = LIMITS_MIN_INFLIGHT_BYTES, .max = LIMITS_MAX_INFLIGHT_BYTES,
	    .def = LIMITS_DEFAULT_INFLIGHT_BYTES, .late = true,
	    .doc = "the memory of every connection's requests together" },
	{ LIMITS(max_client_share), .name = "max_client_share",
	    .type = SETTING_RATIO, .unit = "%", .min = LIMITS_MIN_CLIENT_SHARE,
	    .max = LIMITS_MAX_CLIENT_SHARE, .def = LIMITS_DEFAULT_CLIENT_SHARE,
	    .doc = "the share of max_inflight_bytes one client (address or "
		   "uid) may hold" },
	{ LIMITS(max_request_bytes), .name = "max_request_bytes",
	    .type = SETTING_BYTES, .unit = "bytes",
	    .min = LIMITS_MIN_REQUEST_BYTES, .max = LIMITS_MAX_REQUEST_BYTES,
	    .def = 64u << 20, .late = true,
	    .doc = "the longest read or write of a client that did not agree "
		   "on block sizes" },
	{ LIMITS(max_requests_per_connection),
	    .name = "max_requests_per_connection", .type = SETTING_UINT,
	    .unit = "requests", .min = 1, .max = LIMITS_MAX_CONN_REQUESTS,
	    .def = 256, .doc = "requests in flight on one connection" },
	{ LIMITS(max_inflight_bytes_per_connection),
	    .name = "max_inflight_bytes_per_connection", .type = SETTING_BYTES,
	    .unit = "bytes", .min = LIMITS_MIN_CONN_INFLIGHT_BYTES,
	    .max = LIMITS_MAX_CONN_INFLIGHT_BYTES, .def = 64u << 20,
	    .late = true,
	    .doc = "the bytes of one connection's requests in flight" },
	{ LIMITS(handshake_timeout_s), .name = "handshake_timeout_s",
	    .type = SETTING_UINT, .unit = "s", .min = 1, .max = 3600, .def = 30,
	    .doc = "a connection has this long to finish the handshake" },
	{ LIMITS(client_ipv6_prefix), .name = "client_ipv6_prefix",
	    .type = SETTING_UINT, .unit = "bits", .min = 1, .max = 128,
	    .def = 128,
	    .doc = "an IPv6 client is its address cut to this many bits" },
	{ LIMITS(max_cache_requests), .name = "max_cache_requests",
	    .type = SETTING_UINT, .unit = "requests", .min = 1, .max = 1024,
	    .def = 2,
	    .doc = "NBD_CMD_CACHE requests carried out at once on a device" },
	{ LIMITS(max_cache_share), .name = "max_cache_share",
	    .type = SETTING_UINT, .unit = "%", .min = 1, .max = 100, .def = 25,
	    .doc = "the most of the cache one NBD_CMD_CACHE request reads" },

	{ TLS(mode), .name = "mode", .type = SETTING_ENUM, .unit = "",
	    .max = 16, .names = settings_tls_modes, .def = TLS_OFF,
	    .doc = "STARTTLS refused, offered, or required before anything "
		   "else" },
	{ TLS(certificates), .name = "certificates", .type = SETTING_STRING,
	    .unit = "", .min = 1, .max = PATH_MAX,
	    .doc = "a directory of ca-cert.pem, server-cert.pem and "
		   "server-key.pem" },
	{ TLS(verify_peer), .name = "verify_peer", .type = SETTING_BOOL,
	    .unit = "", .def = false, .late = true,
	    .doc = "a client must show a certificate the CA signed" },
	{ TLS(psk_file), .name = "psk_file", .type = SETTING_STRING, .unit = "",
	    .min = 1, .max = PATH_MAX,
	    .doc = "a file of \"username:hexkey\" lines (instead of "
		   "certificates)" },
	{ TLS(priority), .name = "priority", .type = SETTING_STRING, .unit = "",
	    .min = 1, .max = 1024,
	    .doc = "the GnuTLS priority string (unset: \"NORMAL\")" },

	{ MEMORY(lock), .name = "lock", .type = SETTING_BOOL, .unit = "",
	    .def = false,
	    .doc = "the process's memory is locked (mlockall) at start" },
	{ MEMORY(prefault), .name = "prefault", .type = SETTING_BOOL,
	    .unit = "", .def = true,
	    .doc = "the cache is faulted in at start" },

	{ METRICS(listen), .name = "listen", .type = SETTING_STRING, .unit = "",
	    .min = 1, .max = 255, .late = true,
	    .doc = "the Prometheus endpoint's \"host:port\"; unset: off" },
	{ METRICS(max_connections), .name = "max_connections",
	    .type = SETTING_UINT, .unit = "connections", .min = 1, .max = 1024,
	    .def = 32, .doc = "metrics connections at once" },
	{ METRICS(max_connections_per_client),
	    .name = "max_connections_per_client", .type = SETTING_UINT,
	    .unit = "connections", .min = 1, .max = 1024, .def = 4,
	    .doc = "metrics connections of one address at once" },
	{ METRICS(timeout_s), .name = "timeout_s", .type = SETTING_UINT,
	    .unit = "s", .min = 1, .max = 3600, .def = 10,
	    .doc = "a metrics connection silent this long is closed" },

	/* Read by hand (config.c, config-listen.c, config-export.c). */
	{ TOP(run_as.user), .name = "user", .type = SETTING_STRING, .unit = "",
	    .min = 1, .max = 255, .by_hand = true,
	    .doc = "the user wbd runs as once started (unset: who started "
		   "it)" },
	{ TOP(run_as.group), .name = "group", .type = SETTING_STRING,
	    .unit = "", .min = 1, .max = 255, .by_hand = true,
	    .doc = "its group, with user (unset: the user's primary group)" },
	{ TOP(io_threads), .name = "io_threads", .type = SETTING_UINT,
	    .unit = "threads", .min = 0, .max = IO_THREADS_MAX, .def = 0,
	    .by_hand = true,
	    .doc = "threads serving NBD connections (0: one per CPU)" },
	{ TOP(io_threads_batch), .name = "io_threads_batch",
	    .type = SETTING_BOOL, .unit = "", .def = true, .by_hand = true,
	    .doc = "those threads run as SCHED_BATCH: a request does not "
		   "preempt its client, whose queue is then read at once" },
	{ TOP(default_export), .name = "default_export", .type = SETTING_STRING,
	    .unit = "", .min = 1, .max = NAME_BYTES, .by_hand = true,
	    .doc = "the export the empty name reaches, or \"none\" (unset: "
		   "the first)" },

	{ JOURNALS(dir), .name = "dir", .type = SETTING_STRING, .unit = "",
	    .min = 1, .max = PATH_MAX, .by_hand = true,
	    .doc = "a directory of the exports' write logs, one file each "
		   "named after its export (unset: none)" },
	{ JOURNALS(size_bytes), .name = "size", .type = SETTING_BYTES,
	    .unit = "bytes", .min = 0, .max = INT64_MAX,
	    .def = CONFIG_JOURNAL_DEFAULT_BYTES, .by_hand = true,
	    .doc = "an export's log's size unless its journal group says" },
	{ NO_FIELD("journal"), .name = "mode", .type = SETTING_ENUM, .unit = "",
	    .max = 16, .names = settings_journal_modes, .def = 0,
	    .by_hand = true,
	    .doc = "an export's log's mode unless its journal group says" },
	{ JOURNALS(ordered), .name = "ordered", .type = SETTING_BOOL,
	    .unit = "", .def = false, .by_hand = true,
	    .doc = "an export's log's ordered unless its journal group "
		   "says" },
	{ JOURNALS(state_dir), .name = "state_dir", .type = SETTING_STRING,
	    .unit = "", .min = 1, .max = PATH_MAX, .by_hand = true,
	    .doc = "the directory of the logs' state files unless an "
		   "export's journal group says (unset: beside a file; "
		   "journal.dir for a block device)" },

	{ NO_FIELD("listen"), .name = "tcp", .type = SETTING_LIST, .unit = "",
	    .by_hand = true,
	    .doc = "TCP listeners, each \"host:port\" or a group of its "
		   "keys" },
	{ NO_FIELD("listen"), .name = "unix", .type = SETTING_LIST, .unit = "",
	    .by_hand = true,
	    .doc = "Unix socket listeners, each a path or a group of its "
		   "keys" },
	{ LISTEN(unix_mode), .name = "unix_mode", .type = SETTING_MODE,
	    .unit = "", .min = 0, .max = 0777, .def = 0660, .by_hand = true,
	    .doc = "the Unix sockets' file mode" },
	{ LISTEN(unix_group), .name = "unix_group", .type = SETTING_STRING,
	    .unit = "", .min = 1, .max = 255, .by_hand = true,
	    .doc = "the Unix sockets' group, a group of this machine" },
	{ NO_FIELD("listen.tcp"), .name = "address", .type = SETTING_STRING,
	    .unit = "", .min = 1, .max = 255, .by_hand = true,
	    .doc = "the listener's \"host:port\" (required)" },
	{ NO_FIELD("listen.tcp"), .name = "idle_timeout_s",
	    .type = SETTING_UINT, .unit = "s", .min = 0, .max = IDLE_MAX_S,
	    .by_hand = true, .unset = true,
	    .doc = "the idle timeout of the connections it accepts (0: never; "
		   "unset: the limits')" },
	{ NO_FIELD("listen.unix"), .name = "path", .type = SETTING_STRING,
	    .unit = "", .min = 1, .max = UNIX_PATH_BYTES, .by_hand = true,
	    .doc = "the socket's path (required)" },
	{ NO_FIELD("listen.unix"), .name = "idle_timeout_s",
	    .type = SETTING_UINT, .unit = "s", .min = 0, .max = IDLE_MAX_S,
	    .by_hand = true, .unset = true,
	    .doc = "the idle timeout of the connections it accepts (0: never; "
		   "unset: the limits')" },

	{ EXPORT(name), .name = "name", .type = SETTING_STRING, .unit = "",
	    .min = 1, .max = NAME_BYTES, .by_hand = true,
	    .doc = "the name clients ask for (required)" },
	{ EXPORT(description), .name = "description", .type = SETTING_STRING,
	    .unit = "", .min = 1, .max = NAME_BYTES, .by_hand = true,
	    .doc = "a line clients are shown" },
	{ EXPORT(backing), .name = "backing", .type = SETTING_STRING,
	    .unit = "", .min = 1, .max = PATH_MAX, .by_hand = true,
	    .doc = "a file, a block device or an NBD URI (required)" },
	{ EXPORT(size_bytes), .name = "size", .type = SETTING_BYTES,
	    .unit = "bytes", .min = 0, .max = INT64_MAX, .def = 0,
	    .by_hand = true,
	    .doc = "the export's size (0: the backing's own)" },
	{ EXPORT(readonly), .name = "readonly", .type = SETTING_BOOL,
	    .unit = "", .def = false, .by_hand = true,
	    .doc = "writes are refused" },
	{ EXPORT(direct), .name = "direct", .type = SETTING_BOOL, .unit = "",
	    .def = false, .by_hand = true,
	    .doc = "a local backing is opened with O_DIRECT" },
	{ EXPORT(cache_mode), .name = "cache_mode", .type = SETTING_ENUM,
	    .unit = "", .max = 32, .names = settings_cache_modes, .def = 0,
	    .by_hand = true,
	    .doc = "write-back, or every write through to the backing first "
		   "(until the first FLUSH)" },
	{ NO_FIELD("exports"), .name = "tls", .type = SETTING_ENUM, .unit = "",
	    .max = 16, .names = settings_export_tls, .def = 0, .by_hand = true,
	    .doc = "served over TLS only, or either way" },
	{ NO_FIELD("exports"), .name = "allow", .type = SETTING_LIST,
	    .unit = "", .by_hand = true,
	    .doc = "who may open it: addresses, networks, uids, groups, TLS "
		   "names (unset: everyone)" },
	{ EXPORT(idle_timeout_s), .name = "idle_timeout_s",
	    .type = SETTING_UINT, .unit = "s", .min = 0, .max = IDLE_MAX_S,
	    .by_hand = true, .unset = true,
	    .doc = "its connections' idle timeout (0: never; unset: the "
		   "listener's or the limits')" },
	{ JOURNAL(path), .name = "path", .type = SETTING_STRING, .unit = "",
	    .min = 1, .max = PATH_MAX, .by_hand = true,
	    .doc = "the write log's file or block device, an absolute path "
		   "(unset: a file in journal.dir, which is then required)" },
	{ JOURNAL(size_bytes), .name = "size", .type = SETTING_BYTES,
	    .unit = "bytes", .min = 0, .max = INT64_MAX,
	    .def = CONFIG_JOURNAL_DEFAULT_BYTES, .by_hand = true,
	    .doc = "the log's size for a file, at least 1 MiB and 8 KiB (0: "
		   "an existing file or a device whole)" },
	{ NO_FIELD("exports.journal"), .name = "mode", .type = SETTING_ENUM,
	    .unit = "", .max = 16, .names = settings_journal_modes, .def = 0,
	    .by_hand = true,
	    .doc = "what is logged: what a FLUSH covers, or every write" },
	{ JOURNAL(ordered), .name = "ordered", .type = SETTING_BOOL, .unit = "",
	    .def = false, .by_hand = true,
	    .doc = "the backing store receives whole FLUSH epochs, in order, "
		   "applied from the log" },
	{ JOURNAL(state_dir), .name = "state_dir", .type = SETTING_STRING,
	    .unit = "", .min = 1, .max = PATH_MAX, .by_hand = true,
	    .doc = "the directory of the log's state file, written if the "
		   "log fails (unset: the top level's)" },
};

const size_t settings_n = sizeof settings_table / sizeof settings_table[0];

/* Each group's struct in struct wbd_config. */
static const struct {
	const char *name;
	size_t offset;
} settings_groups[] = {
	{ "cache", offsetof(struct wbd_config, cache) },
	{ "writeback", offsetof(struct wbd_config, writeback) },
	{ "control", offsetof(struct wbd_config, control) },
	{ "remote", offsetof(struct wbd_config, remote) },
	{ "limits", offsetof(struct wbd_config, limits) },
	{ "tls", offsetof(struct wbd_config, tls) },
	{ "memory", offsetof(struct wbd_config, memory) },
	{ "metrics", offsetof(struct wbd_config, metrics) },
	{ "", 0 },
	{ "listen", 0 },
};

void *
settings_conf(const char *group, struct wbd_config *cfg)
{
	for (size_t i = 0;
	     i < sizeof settings_groups / sizeof settings_groups[0]; i++)
		if (strcmp(settings_groups[i].name, group) == 0)
			return (char *)cfg + settings_groups[i].offset;
	return NULL;
}

int
settings_defaults(struct wbd_config *cfg)
{
	const struct setting *s;
	char **str;
	void *conf;

	for (s = settings_table; s < settings_table + settings_n; s++) {
		conf = settings_conf(s->group, cfg);
		if (conf == NULL || s->size == 0)
			continue; /* per element, or a list: by hand */
		if (s->pair != NULL && s->def == 0)
			continue; /* the form not in use: memset's 0 */
		if (s->type != SETTING_STRING) {
			settings_store(s, conf, s->def);
			continue;
		}
		str = (char **)((char *)conf + s->offset);
		free(*str);
		*str = NULL;
		if (s->def_str != NULL && (*str = strdup(s->def_str)) == NULL)
			return -1;
	}
	return 0;
}
