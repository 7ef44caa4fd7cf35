/*
 * config.h - wbd's configuration, loaded from a libconfig file.
 *
 * config_load() fills a struct wbd_config from a file; every error names the
 * file, the line and what was expected.  The structure is plain data: the
 * daemon copies what it needs at start-up (and on reload), so the loader
 * never touches live state.  Owned by the main thread.
 */
#ifndef WBD_CONFIG_H
#define WBD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "access.h"
#include "ctl-proto.h"
#include "settings.h"
#include "tls.h"

#define WBD_DEFAULT_CONFIG   "/etc/wbd/wbd.conf"
#define WBD_DEFAULT_TCP      "127.0.0.1:10809"

enum cache_mode {
	CACHE_WRITEBACK = 0,            /* default */
	CACHE_WRITETHROUGH,             /* every write reaches the backing first */
	CACHE_WRITETHROUGH_UNTIL_FLUSH, /* writethrough until the client flushes */
};

const char *cache_mode_name(enum cache_mode m);
int cache_mode_parse(const char *s, enum cache_mode *out);

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

struct export_conf {
	char *name;
	char *description;              /* may be NULL */
	char *backing;                  /* path, or an NBD URI (nbd://...) */
	uint64_t size_bytes;            /* 0: use the backing's size */
	bool readonly;
	bool direct;                    /* O_DIRECT on a local backing */
	enum cache_mode cache_mode;
	bool tls_require;               /* tls = "require": TLS-only */
	struct access_list *allow;      /* NULL: everyone (no allow key) */
	int line;                       /* where it was defined, for messages */
	struct config_where backing_at, size_at;
};

struct cache_conf {
	uint64_t size_bytes;            /* resolved: a percentage is of RAM */
	unsigned size_pct;              /* nonzero if given as "N%" */
	uint32_t page_size;             /* power of two, 512 .. 1M */
	uint32_t readahead_bytes;       /* most read ahead at once, 0: off */
};

struct control_conf {
	char *socket;                   /* NULL: no control socket */
	unsigned mode;                  /* socket file mode, default 0660 */
	char *group;                    /* socket file group, may be NULL */
	char *admin_group;              /* may change settings; may be NULL */
	unsigned max_clients;           /* clients at once, default 64 */
	unsigned max_clients_per_uid;   /* of them one uid's, default 16 */
	unsigned admin_reserved;        /* the last slots, for root and the
	                                   admin group, default 8 */
	unsigned idle_timeout_s;        /* close a client idle this long;
	                                   0: never; default 60 */
	struct config_where socket_at, group_at;
};

/* Remote (NBD) backing devices: connection and reconnection, in ms. */
struct remote_conf {
	unsigned connect_timeout_ms;    /* one connection attempt, default 10 s */
	unsigned reconnect_max_ms;      /* back-off cap, default 5 s */
	unsigned io_timeout_ms;         /* one request; reads wait this long for
	                                   a reconnection; default 30 s */
	bool read_connection;           /* misses on a connection of their own
	                                   (nbdread.h); default true */
	unsigned unflushed_ranges;      /* ranges written, not yet flushed, kept
	                                   per export (wb_target.uf); 1024 */
	unsigned commit_interval_ms;    /* writeback flushes what it wrote at
	                                   most this often; 0: never; 50 */
};

/* What one client, or all of them, may take (slots). */
#define LIMITS_MAX_CONNECTIONS 65536
struct limits_conf {
	unsigned max_connections; /* open NBD connections, default 1024 */
	unsigned max_connections_per_client; /* per address (TCP) or uid
	                                        (Unix socket), default 64 */
	unsigned idle_timeout_s;             /* close a connection that sends
	                                   nothing this long; 0 (default): off */
	unsigned stall_timeout_s;    /* close a connection that holds replies
	                                it does not read, or a payload it does
	                                not finish, this long; 0: off */
	uint64_t max_inflight_bytes; /* the memory budget of every
	                                connection together (budget.h) */
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

struct wbd_config {
	char *path;                     /* the file it came from */
	/* The files read: path as given, then each @include as written
	 * (as libconfig names them in its messages). */
	char **files;
	size_t n_files;

	char **listen_tcp;              /* "host:port", "[v6]:port" */
	struct config_where *listen_tcp_at; /* NULL: the default listener */
	size_t n_listen_tcp;
	char **listen_unix;             /* socket paths */
	struct config_where *listen_unix_at;
	size_t n_listen_unix;
	unsigned unix_mode; /* their file mode, default 0660 */
	char *unix_group;   /* their group, may be NULL */
	uint32_t unix_gid;  /* resolved unix_group */

	struct run_as_conf run_as;

	unsigned io_threads;            /* 0: one per CPU */

	struct cache_conf cache;
	struct writeback_conf writeback;
	struct control_conf control;
	struct remote_conf remote;
	struct limits_conf limits;
	struct tls_conf tls;
	struct memory_conf memory;
	struct metrics_conf metrics;

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

/*
 * Load PATH into *CFG (which is zeroed first).  On error returns -1 and
 * writes "PATH:LINE: what was expected" into ERR (up to ERRLEN bytes;
 * "PATH: ..." when no line can be blamed, as for a missing file or a file
 * with no exports at all);
 * *CFG is then left empty.  A good file may carry warnings
 * (cfg->warnings), for the caller to show.
 */
int config_load(const char *path, struct wbd_config *cfg, char *err, size_t errlen);

/*
 * Defaults only, no exports: what a missing group means.  It allocates the
 * default listener, so config_free() must follow.
 */
void config_defaults(struct wbd_config *cfg);

void config_free(struct wbd_config *cfg);

/*
 * "FILE:LINE" of AT (which may be NULL), FILE one of cfg->files; or cfg->path
 * alone when AT is not written.  Into BUF; returns BUF.
 */
const char *config_where_str(const struct wbd_config *cfg,
    const struct config_where *at, char *buf, size_t len);

/* Log each of CFG's warnings, after PREFIX (such as "reload: "). */
void config_log_warnings(const struct wbd_config *cfg, const char *prefix);

/* The min/max ratio for device NAME ("MAJ:MIN"): an override or the default. */
void config_device_ratios(const struct wbd_config *cfg, const char *name,
    unsigned *min_ratio, unsigned *max_ratio);

/* Export EC lets in anyone who reaches a listener: it has no allow list. */
bool config_export_open_to_all(const struct export_conf *ec);
/*
 * The TCP listeners of CFG open to whoever reaches them: with TLS off
 * (TLS_ON false), bound to an address other than loopback, while some
 * export is open to all.  Sets OUT[0..MAX) to those listeners (strings of
 * cfg->listen_tcp) and returns how many there are.  A host name other than
 * "localhost" is resolved.
 */
size_t config_exposed_listeners(const struct wbd_config *cfg, bool tls_on,
    const char **out, size_t max);

/*
 * Split a TCP listener, "host:port" or "[v6addr]:port" (port 1 to 65535,
 * numeric), into *HOST (without brackets) and *PORT, both to be freed by
 * the caller.  Returns 0, or -1 with errno EINVAL or ENOMEM.
 */
int config_parse_hostport(const char *s, char **host, char **port);

#endif
