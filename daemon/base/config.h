/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * config.h - wbd's configuration as plain data: one struct per group of
 * wbd.conf (struct wbd_config holds them all), their enums and bounds.
 * Each key's name, type, range, default and doc line are a row of the
 * settings table (settings.h).
 *
 * No parser here: conf/config-load.h fills a struct wbd_config from a
 * file.  Every component reads its group from this header, so none of
 * them depends on the parser.  The daemon copies what it needs at
 * start-up (and on reload), so the loader never touches live state.
 * Owned by the main thread.
 */
#ifndef WBD_CONFIG_H
#define WBD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "settings.h"

struct access_list; /* export/access.h */

enum cache_mode {
	CACHE_WRITEBACK = 0, /* default */
	CACHE_WRITETHROUGH,  /* every write reaches the backing first */
	CACHE_WRITETHROUGH_UNTIL_FLUSH, /* writethrough until the client flushes */
};

enum tls_mode {
	TLS_OFF,     /* STARTTLS refused with NBD_REP_ERR_POLICY */
	TLS_ON,      /* offered; exports may require it */
	TLS_REQUIRE, /* nothing but STARTTLS and ABORT before it */
};

/* The tls group of the configuration (net/tls.h loads what it names). */
struct tls_conf {
	enum tls_mode mode;
	char *certificates; /* a directory: ca-cert.pem, server-cert.pem,
	                           server-key.pem, ca-crl.pem (if present) */
	bool verify_peer;   /* a client certificate signed by the CA */
	char *psk_file;     /* or: "username:hexkey" lines */
	char *priority;     /* GnuTLS priority string, default "NORMAL" */
};

/* The most exports a configuration may have (the export table's size). */
#define CONFIG_MAX_EXPORTS 1024

/*
 * Where a setting is written, for what is checked after the file is read
 * (wbd -n's checks of this host, check.c): line LINE of cfg->files[FILE].
 * LINE 0: it is not written (a default).
 */
struct config_where {
	unsigned file;
	unsigned line;
};

/* An export's persistent write log (journal = { ... } in an export, or
 * a file in the top level's journal.dir; docs/journal.md). */
enum journal_mode {
	JOURNAL_OFF = 0,
	JOURNAL_ON_FLUSH, /* a FLUSH or FUA write logs what it covers */
	JOURNAL_ON_WRITE, /* every write is logged before its reply */
};

struct export_journal_conf {
	char *path;          /* NULL: no journal */
	char *dir;           /* the top level's journal.dir, made if missing,
	                        when PATH is a file there; else NULL */
	uint64_t size_bytes; /* of a file made; 0: a block device whole */
	enum journal_mode mode;
	/* The backing device receives whole FLUSH epochs only, in order,
	 * applied from the log (docs/journal.md, "Ordered writeback"). */
	bool ordered;
	struct config_where path_at;
	/* The directory of the log's state file (docs/journal.md, "A log
	 * that fails"): journal.state_dir (the export's, else the top
	 * level's), used for a file and a block device alike; else the top
	 * level's journal.dir, used for a block device only (a file's is
	 * beside it); else NULL.  xj_state_path says which. */
	char *state_dir;
	bool state_dir_set; /* STATE_DIR is journal.state_dir */
	struct config_where state_dir_at;
};

/*
 * journal = { dir; size; mode; ordered; state_dir; } at the top level: what an
 * export's journal group leaves out, and with DIR, a log for every
 * writable export without a journal of its own (journal = false: none),
 * a file in DIR named after the export (config_journal_file).
 */
struct journal_conf {
	char *dir; /* an absolute path, or NULL */
	uint64_t size_bytes;
	enum journal_mode mode;
	bool ordered;
	struct config_where dir_at;
	char *state_dir; /* the logs' state files' directory, or NULL */
	struct config_where state_dir_at;
};

/* The smallest journal (two superblocks and 1 MiB of records). */
#define CONFIG_JOURNAL_MIN_BYTES ((2u << 12) + (1u << 20))
#define CONFIG_JOURNAL_DEFAULT_BYTES (256ull << 20)

struct export_conf {
	char *name;
	char *description;   /* may be NULL */
	char *backing;       /* path, or an NBD URI (nbd://...) */
	uint64_t size_bytes; /* 0: use the backing's size */
	bool readonly;
	bool direct; /* O_DIRECT on a local backing */
	enum cache_mode cache_mode;
	bool tls_require;          /* tls = "require": TLS-only */
	struct access_list *allow; /* NULL: everyone (no allow key) */
	unsigned idle_timeout_s;   /* its connections' idle timeout, */
	bool idle_timeout_set;     /* if given (else the limits') */
	int line;                  /* where it was defined, for messages */
	struct config_where backing_at, size_at;
	struct export_journal_conf journal;
};

struct cache_conf {
	uint64_t size_bytes;      /* resolved: a percentage is of RAM */
	unsigned size_pct;        /* nonzero if given as "N%" */
	uint32_t page_size;       /* power of two, 512 .. 1M */
	uint32_t readahead_bytes; /* most read ahead at once, 0: off */
};

struct control_conf {
	char *socket;                 /* NULL: no control socket */
	unsigned mode;                /* socket file mode, default 0660 */
	char *group;                  /* socket file group, may be NULL */
	char *admin_group;            /* may change settings; may be NULL */
	unsigned max_clients;         /* clients at once, default 64 */
	unsigned max_clients_per_uid; /* of them one uid's, default 16 */
	unsigned admin_reserved;      /* the last slots, for root and the
	                                   admin group, default 8 */
	unsigned idle_timeout_s;      /* close a client idle this long;
	                                   0: never; default 60 */
	struct config_where socket_at, group_at;
};

/* Remote (NBD) backing devices: connection and reconnection, in ms. */
struct remote_conf {
	unsigned connect_timeout_ms; /* one connection attempt, default 10 s */
	unsigned reconnect_max_ms;   /* back-off cap, default 5 s */
	unsigned io_timeout_ms;      /* one request; reads wait this long for
	                                   a reconnection; default 30 s */
	bool read_connection;        /* misses on a connection of their own
	                                   (nbdread.h); default true */
	bool write_connection;       /* writeback's writes on a connection of
	                                   their own (nbdread.h); default true */
	unsigned unflushed_ranges;   /* ranges written, not yet flushed, kept
	                                   per export (wb_target.uf); 1024 */
	unsigned commit_interval_ms; /* writeback flushes what it wrote at
	                                   most this often; 0: never; 50 */
	uint64_t max_writeback_inflight_bytes; /* bound of the writeback
	                                   window (linkest.h); 64 MiB */
	unsigned min_writeback_inflight;       /* the writeback window's least,
	                                    in writes (writeback.c); 64 */
	bool write_behind;            /* write back an idle device's dirty
	                                   data at once; default true */
	unsigned fua_max_runs;        /* runs written with FUA for clients
	                                   that FLUSH, between two of their
	                                   FLUSHes; 0: none; default 64 */
	uint64_t max_readahead_bytes; /* read-ahead's and the read window's
	                                 bound (fill.c); 64 MiB */
	unsigned conn_depth; /* commands in flight on each connection to a
	                        multi-conn remote before another opens */
	/* Write-behind leaves a client's pages to its FLUSH this long
	 * after one (writeback.c); 0: never; 100. */
	unsigned write_behind_defer_ms;
	/* Connections one export opens to its remote at most, libnbd's
	 * and wbd's own (backend-nbd.c); default and bound 13. */
	unsigned max_connections;
};

/* remote.conn_depth: its default (why 16: BN_CONN_DEPTH, backend-nbd.c)
 * and its bound. */
#define REMOTE_DEFAULT_CONN_DEPTH 16u
#define REMOTE_MAX_CONN_DEPTH 256u

/* remote.max_connections: its default and bound, every connection an
 * export opens: libnbd's 8, the read connection and 4 write connections
 * (backend-nbd.c). */
#define REMOTE_MAX_CONNECTIONS 13u

/* remote.write_behind_defer_ms: its default, also a remote's without a
 * remote group (bn_new, backend-nbd.c). */
#define REMOTE_DEFAULT_WRITE_BEHIND_DEFER_MS 100u

/* remote.min_writeback_inflight: its default, also a remote's without a
 * remote group (bn_new, backend-nbd.c), and its bound (writeback.c's
 * WB_WINDOW_MAX). */
#define REMOTE_DEFAULT_MIN_WRITEBACK_INFLIGHT 64u
#define REMOTE_MAX_MIN_WRITEBACK_INFLIGHT 1024u

/* remote.fua_max_runs: its default, also a remote's without a remote
 * group (bn_new, backend-nbd.c). */
#define REMOTE_DEFAULT_FUA_MAX_RUNS 64u

/* What one client, or all of them, may take (slots). */
#define LIMITS_MAX_CONNECTIONS 65536
struct limits_conf {
	unsigned max_connections; /* open NBD connections, default 1024 */
	unsigned max_connections_per_client; /* per address (TCP) or uid
	                                        (Unix socket), default 64 */
	/* The last of max_connections, only for clients holding none;
	 * default 64 (at most max_connections / 16 unless given). */
	unsigned reserved_connections;
	/* Close a connection of a client counted by address that sends
	 * nothing this long; 0: off; default 6 h.  The same for a client of
	 * this host, counted by uid: local_idle_timeout_s, default 0 (off). */
	unsigned idle_timeout_s;
	unsigned local_idle_timeout_s;

	unsigned stall_timeout_s;    /* close a connection that holds replies
	                                it does not read, or a payload it does
	                                not finish, this long; 0: off */
	uint64_t max_inflight_bytes; /* the memory budget of every
	                                connection together (budget.h) */
	unsigned max_client_share;   /* percent of it one client (address
	                                or uid) may hold, default 25 */
	uint32_t max_request_bytes;  /* the longest READ or WRITE from a
	                                client that did not agree on block
	                                sizes */
	unsigned max_requests_per_connection;       /* requests in flight on one
	                                         connection, default 256 */
	uint64_t max_inflight_bytes_per_connection; /* their bytes, default
	                                               64M */
	unsigned handshake_timeout_s; /* to finish the handshake, default 30 */
	unsigned max_cache_requests;  /* NBD_CMD_CACHE carried out at once on
	                                 a device, default 2 */
	unsigned max_cache_share;     /* percent of the cache one
	                                 NBD_CMD_CACHE reads, default 25 */
	unsigned client_ipv6_prefix;  /* an IPv6 client is its address cut to
	                                 this many bits (peer_client_key),
	                                 default 128 (whole) */
};

/* The user and group wbd runs as once started (user = ...; group = ...;),
 * resolved when the file is loaded. */
struct run_as_conf {
	char *user;  /* NULL: stay who it was started as */
	char *group; /* NULL: the user's primary group */
	uint32_t uid, gid;
};

/* memory = { lock; prefault; }: the process's memory (lock: for a kernel
 * client on the same host, docs/service.md). */
struct memory_conf {
	bool lock;     /* mlockall at start; default false */
	bool prefault; /* the cache faulted in at start; default true */
};

/* The HTTP endpoint for Prometheus (metrics-http.c). */
struct metrics_conf {
	char *listen;             /* "host:port"; NULL: off (default) */
	unsigned max_connections; /* at once, default 32 */
	unsigned max_connections_per_client; /* of them one address's
	                                        (peer_client_key), default 4 */
	unsigned timeout_s; /* close one silent this long, default 10 */
};

#define LIMITS_MIN_REQUEST_BYTES (32u << 20) /* the advertised maximum */
#define LIMITS_MAX_REQUEST_BYTES (1u << 30)
#define LIMITS_MAX_CONN_REQUESTS 65536
#define LIMITS_MIN_CONN_INFLIGHT_BYTES (1ull << 20)
#define LIMITS_MAX_CONN_INFLIGHT_BYTES (1ull << 30)
/* The memory budget's (net/budget.h's BUDGET_*_BYTES; conf checks they
 * agree). */
#define LIMITS_DEFAULT_INFLIGHT_BYTES (256ull << 20)
#define LIMITS_MIN_INFLIGHT_BYTES (64ull << 20)
#define LIMITS_MAX_INFLIGHT_BYTES (1ull << 50)
/* limits.max_client_share, percent (budget.h's BUDGET_*_SHARE_PCT). */
#define LIMITS_DEFAULT_CLIENT_SHARE 25u
#define LIMITS_MIN_CLIENT_SHARE 1u
#define LIMITS_MAX_CLIENT_SHARE 100u

struct wbd_config {
	char *path; /* the file it came from */
	/* The files read: path as given, then each @include as written
	 * (as libconfig names them in its messages). */
	char **files;
	size_t n_files;

	char **listen_tcp;                  /* "host:port", "[v6]:port" */
	struct config_where *listen_tcp_at; /* NULL: the default listener */
	int *listen_tcp_idle_s; /* each one's idle_timeout_s, or -1 */
	size_t n_listen_tcp;
	char **listen_unix; /* socket paths */
	struct config_where *listen_unix_at;
	int *listen_unix_idle_s;
	size_t n_listen_unix;
	unsigned unix_mode; /* their file mode, default 0660 */
	char *unix_group;   /* their group, may be NULL */
	uint32_t unix_gid;  /* resolved unix_group */

	struct run_as_conf run_as;

	unsigned io_threads;   /* 0: one per CPU */
	bool io_threads_batch; /* SCHED_BATCH, default true */

	struct cache_conf cache;
	struct writeback_conf writeback;
	struct control_conf control;
	struct remote_conf remote;
	struct limits_conf limits;
	struct tls_conf tls;
	struct memory_conf memory;
	struct metrics_conf metrics;
	struct journal_conf journal;

	struct export_conf *exports;
	size_t n_exports;

	/* What is allowed but unwise ("FILE:LINE: KEY: ..."), one a line,
	 * each ending "\n"; NULL if nothing is. */
	char *warnings;
	/* The export the empty name reaches: NULL for the first one,
	 * CONFIG_NO_DEFAULT_EXPORT for none, else one of EXPORTS. */
	char *default_export;
};

#define CONFIG_NO_DEFAULT_EXPORT "none"
#define CACHE_MAX_READAHEAD_BYTES (64u << 20)

#endif
