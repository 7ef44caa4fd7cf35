/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-config.c - config_load(): what wbd.conf may say, the defaults it
 * leaves out, and one test per kind of mistake, each checking that the
 * message names the file, the line and the key.
 *
 * Each test writes its configuration into a fresh temporary directory, so
 * the text under test sits next to the assertions about it.
 */
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "access.h"
#include "config-load.h"

#define SHIPPED_CONF    TEST_SRCDIR "/../../conf/wbd.conf"

#define MiB             (UINT64_C(1) << 20)
#define GiB             (UINT64_C(1) << 30)

/* One export that is valid on its own, for tests about other keys. */
#define EXPORTS_OK \
	"exports = ( { name = \"d\"; backing = \"/tmp/d.img\"; } );\n"

struct fixture {
	char dir[64];
	char path[128];
	struct wbd_config cfg;
	char err[1024];
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);

	if (f == NULL)
		return -1;
	strcpy(f->dir, "/tmp/test-config.XXXXXX");
	if (mkdtemp(f->dir) == NULL) {
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	struct dirent *de;
	char path[512];
	DIR *d;

	config_free(&f->cfg);
	if ((d = opendir(f->dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof path, "%s/%s", f->dir, de->d_name);
			unlink(path);
		}
		closedir(d);
	}
	rmdir(f->dir);
	free(f);
	return 0;
}

/* Write TEXT to NAME in the test's directory; returns its path. */
static const char *
write_conf(struct fixture *f, const char *name, const char *text)
{
	FILE *fp;

	snprintf(f->path, sizeof f->path, "%s/%s", f->dir, name);
	assert_non_null(fp = fopen(f->path, "w"));
	assert_int_equal(fputs(text, fp) >= 0, 1);
	assert_int_equal(fclose(fp), 0);
	return f->path;
}

/* PATH's text, every FROM in it replaced by TO (FROM found at least
 * once). */
static char *
file_replacing(const char *path, const char *from, const char *to)
{
	char *text = NULL, *out;
	size_t cap = 0, nfrom = strlen(from), nto = strlen(to), n = 0;
	FILE *in = fopen(path, "r");

	assert_non_null(in);
	assert_true(getdelim(&text, &cap, '\0', in) > 0);
	fclose(in);
	for (const char *p = text; (p = strstr(p, from)); p += nfrom)
		n++;
	assert_true(n > 0);
	assert_non_null(out = malloc(strlen(text) + n * nto + 1));
	out[0] = '\0';
	const char *p = text;
	for (const char *at; (at = strstr(p, from)); p = at + nfrom) {
		strncat(out, p, (size_t)(at - p));
		strcat(out, to);
	}
	strcat(out, p);
	free(text);
	return out;
}

static void
load_ok(struct fixture *f, const char *path)
{
	if (config_load(path, &f->cfg, f->err, sizeof f->err) != 0)
		fail_msg("config_load(%s) failed: %s", path, f->err);
}

/*
 * TEXT must fail to load with a message that starts "PATH:LINE: KEY:"
 * ("PATH:LINE:" if KEY is NULL, "PATH: KEY:" if LINE is 0) and contains
 * WHAT.  The configuration is left empty.
 */
static void
expect_error_in(struct fixture *f, const char *name, const char *text,
    const char *errfile, int line, const char *key, const char *what)
{
	char prefix[512];
	const char *path = write_conf(f, name, text);

	if (errfile == NULL)
		errfile = path;
	errno = 0;
	if (config_load(path, &f->cfg, f->err, sizeof f->err) != -1)
		fail_msg("%s loaded, expected an error about %s", name,
		    key ? key : what);
	assert_int_equal(errno, EINVAL);
	if (line == 0)
		snprintf(prefix, sizeof prefix, "%s: %s:", errfile, key);
	else if (key == NULL)
		snprintf(prefix, sizeof prefix, "%s:%d:", errfile, line);
	else
		snprintf(prefix, sizeof prefix, "%s:%d: %s:", errfile, line,
		    key);
	if (strncmp(f->err, prefix, strlen(prefix)) != 0)
		fail_msg("message \"%s\" does not start with \"%s\"", f->err,
		    prefix);
	if (strstr(f->err, what) == NULL)
		fail_msg("message \"%s\" does not say \"%s\"", f->err, what);
	assert_null(f->cfg.path);
	assert_int_equal(f->cfg.n_exports, 0);
	assert_int_equal(f->cfg.n_listen_tcp, 0);
}

static void
expect_error(struct fixture *f, const char *name, const char *text,
    int line, const char *key, const char *what)
{
	expect_error_in(f, name, text, NULL, line, key, what);
}

/* ---- Files that load. ---- */

static void
test_shipped_conf_loads(void **state)
{
	struct fixture *f = *state;
	struct wbd_config *c = &f->cfg;
	struct export_conf *e;

	if (getgrnam("wbd-admin")) {
		load_ok(f, SHIPPED_CONF);
		assert_string_equal(c->path, SHIPPED_CONF);
	} else {
		/* The package makes the group (sysusers); without it, the
		 * file as shipped, its group that of this process. */
		const struct group *g = getgrgid(getgid());
		assert_non_null(g);
		char to[128];
		snprintf(to, sizeof to, "\"%s\"", g->gr_name);
		char *conf = file_replacing(SHIPPED_CONF, "\"wbd-admin\"", to);
		load_ok(f, write_conf(f, "shipped.conf", conf));
		free(conf);
	}
	assert_int_equal(c->n_listen_tcp, 1);
	assert_string_equal(c->listen_tcp[0], "127.0.0.1:10809");
	assert_int_equal(c->n_listen_unix, 1);
	assert_string_equal(c->listen_unix[0], "/run/wbd/nbd.sock");
	assert_int_equal(c->io_threads, 0);
	assert_true(c->cache.size_bytes == 256 * MiB);
	assert_int_equal(c->cache.page_size, 4096);
	assert_int_equal(c->writeback.dirty_background.ratio_pct, 10);
	assert_int_equal(c->writeback.dirty.ratio_pct, 20);
	assert_int_equal(c->writeback.dirty_expire_centisecs, 3000);
	assert_int_equal(c->writeback.dirty_writeback_centisecs, 500);
	assert_int_equal(c->writeback.min_workers, 1);
	assert_int_equal(c->writeback.max_workers, 8);
	assert_true(c->writeback.max_io_bytes == MiB);

	assert_int_equal(c->n_exports, 1);
	e = &c->exports[0];
	assert_string_equal(e->name, "disk0");
	assert_string_equal(e->backing, "/var/lib/wbd/disk0.img");
	assert_non_null(e->description);
	assert_true(e->size_bytes == 64 * MiB);
	assert_false(e->readonly);
	assert_int_equal(e->cache_mode, CACHE_WRITEBACK);
	assert_true(e->line > 0);
}

static void
test_minimal_conf_takes_every_default(void **state)
{
	struct fixture *f = *state;
	struct wbd_config *c = &f->cfg;
	struct export_conf *e;

	load_ok(f, write_conf(f, "minimal.conf",
	    "# nothing but the one required thing\n"
	    "exports = (\n"
	    "  { name = \"d\"; backing = \"/tmp/d.img\"; }\n"
	    ");\n"));
	assert_int_equal(c->n_listen_tcp, 1);
	assert_string_equal(c->listen_tcp[0], WBD_DEFAULT_TCP);
	assert_int_equal(c->n_listen_unix, 0);
	assert_int_equal(c->io_threads, 0);
	assert_true(c->cache.size_bytes == 256 * MiB);
	assert_int_equal(c->cache.size_pct, 0);
	assert_int_equal(c->cache.page_size, 4096);
	assert_int_equal(c->writeback.dirty_background.ratio_pct, 10);
	assert_true(c->writeback.dirty_background.bytes == 0);
	assert_int_equal(c->writeback.dirty.ratio_pct, 20);
	assert_true(c->writeback.dirty.bytes == 0);
	assert_int_equal(c->writeback.dirty_expire_centisecs, 3000);
	assert_int_equal(c->writeback.dirty_writeback_centisecs, 500);
	assert_int_equal(c->writeback.min_workers, 1);
	assert_int_equal(c->writeback.max_workers, 8);
	assert_true(c->writeback.max_io_bytes == MiB);

	assert_int_equal(c->n_exports, 1);
	e = &c->exports[0];
	assert_string_equal(e->name, "d");
	assert_string_equal(e->backing, "/tmp/d.img");
	assert_null(e->description);
	assert_true(e->size_bytes == 0);
	assert_false(e->readonly);
	assert_int_equal(e->cache_mode, CACHE_WRITEBACK);
	assert_int_equal(e->line, 3);
}

static void
test_config_defaults_match_a_minimal_file(void **state)
{
	struct fixture *f = *state;
	struct wbd_config d;

	load_ok(f, write_conf(f, "minimal.conf", EXPORTS_OK));
	config_defaults(&d);
	assert_int_equal(d.n_listen_tcp, 1);
	assert_string_equal(d.listen_tcp[0], f->cfg.listen_tcp[0]);
	assert_int_equal(d.n_exports, 0);
	assert_memory_equal(&d.cache, &f->cfg.cache, sizeof d.cache);
	assert_memory_equal(&d.writeback, &f->cfg.writeback,
	    sizeof d.writeback);
	config_free(&d);
	assert_null(d.listen_tcp);
}

static void
test_sizes_may_be_integers_or_strings(void **state)
{
	struct fixture *f = *state;
	struct wbd_config *c = &f->cfg;

	load_ok(f, write_conf(f, "sizes.conf",
	    "cache = { size = 1073741824L; page_size = 8192; };\n"
	    "writeback = { max_io_bytes = \"2 MiB\"; };\n"
	    "exports = (\n"
	    "  { name = \"a\"; backing = \"/a\"; size = \"1T\"; },\n"
	    "  { name = \"b\"; backing = \"/b\"; size = 1048576; },\n"
	    "  { name = \"c\"; backing = \"/c\"; size = \"512kb\"; }\n"
	    ");\n"));
	assert_true(c->cache.size_bytes == GiB);
	assert_int_equal(c->cache.page_size, 8192);
	assert_true(c->writeback.max_io_bytes == 2 * MiB);
	assert_int_equal(c->n_exports, 3);
	assert_true(c->exports[0].size_bytes == 1024 * GiB);
	assert_true(c->exports[1].size_bytes == MiB);
	assert_true(c->exports[2].size_bytes == 512 * 1024);
}

static void
test_cache_size_may_be_a_share_of_ram(void **state)
{
	struct fixture *f = *state;
	struct wbd_config *c = &f->cfg;
	uint64_t ram = (uint64_t)sysconf(_SC_PHYS_PAGES) *
	    (uint64_t)sysconf(_SC_PAGESIZE);

	load_ok(f, write_conf(f, "pct.conf",
	    "cache = { size = \"25%\"; };\n" EXPORTS_OK));
	assert_int_equal(c->cache.size_pct, 25);
	assert_true(c->cache.size_bytes <= ram / 4);
	assert_true(c->cache.size_bytes > ram / 4 - 4096);
	assert_int_equal(c->cache.size_bytes % c->cache.page_size, 0);
}

static void
test_thresholds_may_be_given_in_bytes(void **state)
{
	struct fixture *f = *state;
	struct wbd_config *c = &f->cfg;

	load_ok(f, write_conf(f, "bytes.conf",
	    "writeback = {\n"
	    "  dirty_background_bytes = \"64M\";\n"
	    "  dirty_bytes = \"128M\";\n"
	    "  dirty_expire_centisecs = 0;\n"
	    "  dirty_writeback_centisecs = 0;\n"
	    "  min_workers = 4; max_workers = 4;\n"
	    "};\n" EXPORTS_OK));
	assert_true(c->writeback.dirty_background.bytes == 64 * MiB);
	assert_int_equal(c->writeback.dirty_background.ratio_pct, 0);
	assert_true(c->writeback.dirty.bytes == 128 * MiB);
	assert_int_equal(c->writeback.dirty.ratio_pct, 0);
	assert_int_equal(c->writeback.dirty_expire_centisecs, 0);
	assert_int_equal(c->writeback.dirty_writeback_centisecs, 0);
	assert_int_equal(c->writeback.min_workers, 4);
	assert_int_equal(c->writeback.max_workers, 4);
}

static void
test_listeners_of_every_form(void **state)
{
	struct fixture *f = *state;
	struct wbd_config *c = &f->cfg;

	load_ok(f, write_conf(f, "listen.conf",
	    "listen = {\n"
	    "  tcp = [ \"[::1]:10809\", \"localhost:10810\",\n"
	    "          \"0.0.0.0:1\", \"[fe80::1%lo]:65535\" ];\n"
	    "  unix = ( \"wbd.sock\", \"/run/wbd/other.sock\" );\n"
	    "};\n" EXPORTS_OK));
	assert_int_equal(c->n_listen_tcp, 4);
	assert_string_equal(c->listen_tcp[0], "[::1]:10809");
	assert_string_equal(c->listen_tcp[3], "[fe80::1%lo]:65535");
	assert_int_equal(c->n_listen_unix, 2);
	assert_string_equal(c->listen_unix[0], "wbd.sock");
}

/* A listener written as a group carries its own idle_timeout_s; one
 * written as a string, or a group without it, has none (-1). */
static void
test_listener_groups_carry_an_idle_timeout(void **state)
{
	struct fixture *f = *state;
	struct wbd_config *c = &f->cfg;
	char buf[256];

	load_ok(f,
	    write_conf(f, "listen-idle.conf",
		"listen = {\n"
		"  tcp = ( \"127.0.0.1:10809\",\n"
		"          { address = \"127.0.0.1:10810\"; idle_timeout_s = 0; },\n"
		"          { address = \"127.0.0.1:10811\";\n"
		"            idle_timeout_s = 30; },\n"
		"          { address = \"127.0.0.1:10812\"; } );\n"
		"  unix = ( { path = \"/run/wbd/a.sock\"; idle_timeout_s = 86400; },\n"
		"           \"/run/wbd/b.sock\" );\n"
		"};\n" EXPORTS_OK));
	assert_int_equal(c->n_listen_tcp, 4);
	assert_string_equal(c->listen_tcp[1], "127.0.0.1:10810");
	assert_string_equal(c->listen_tcp[2], "127.0.0.1:10811");
	assert_int_equal(config_listen_idle_s(c->listen_tcp_idle_s, 0), -1);
	assert_int_equal(config_listen_idle_s(c->listen_tcp_idle_s, 1), 0);
	assert_int_equal(config_listen_idle_s(c->listen_tcp_idle_s, 2), 30);
	assert_int_equal(config_listen_idle_s(c->listen_tcp_idle_s, 3), -1);
	/* Where a group's listener is written: its address's line. */
	config_where_str(c, &c->listen_tcp_at[2], buf, sizeof buf);
	assert_non_null(strstr(buf, "listen-idle.conf:4"));
	assert_int_equal(c->n_listen_unix, 2);
	assert_string_equal(c->listen_unix[0], "/run/wbd/a.sock");
	assert_int_equal(config_listen_idle_s(c->listen_unix_idle_s, 0), 86400);
	assert_int_equal(config_listen_idle_s(c->listen_unix_idle_s, 1), -1);
	config_free(c);

	/* The default listener has none. */
	load_ok(f, write_conf(f, "no-listen.conf", EXPORTS_OK));
	assert_null(c->listen_tcp_idle_s);
	assert_int_equal(config_listen_idle_s(c->listen_tcp_idle_s, 0), -1);
}

static void
test_listener_group_mistakes(void **state)
{
	struct fixture *f = *state;

	expect_error(f, "listen-no-address.conf",
	    "listen = {\n  tcp = ( { idle_timeout_s = 0; } );\n};\n" EXPORTS_OK,
	    2, "listen.tcp[0]", "address is missing");
	expect_error(f, "listen-no-path.conf",
	    "listen = {\n  unix = ( { idle_timeout_s = 0; } );\n};\n" EXPORTS_OK,
	    2, "listen.unix[0]", "path is missing");
	expect_error(f, "listen-idle-big.conf",
	    "listen = {\n  tcp = ( { address = \"127.0.0.1:1\";\n"
	    "    idle_timeout_s = 86401; } );\n};\n" EXPORTS_OK,
	    3, "listen.tcp[0].idle_timeout_s", "86401");
	expect_error(f, "listen-idle-typo.conf",
	    "listen = {\n  tcp = ( { address = \"127.0.0.1:1\";\n"
	    "    idle_timeout = 5; } );\n};\n" EXPORTS_OK,
	    3, "listen.tcp[0].idle_timeout", "did you mean idle_timeout_s?");
	expect_error(f, "listen-address-int.conf",
	    "listen = {\n  tcp = ( { address = 10809; } );\n};\n" EXPORTS_OK, 2,
	    "listen.tcp[0].address", "expected a string such as");
	expect_error(f, "listen-address-bad.conf",
	    "listen = {\n  tcp = ( { address = \"10809\"; } );\n};\n" EXPORTS_OK,
	    2, "listen.tcp[0].address", "expected \"host:port\"");
	expect_error(f, "listen-twice-group.conf",
	    "listen = {\n  tcp = ( \"127.0.0.1:1\",\n"
	    "    { address = \"127.0.0.1:1\"; } );\n};\n" EXPORTS_OK,
	    3, "listen.tcp[1]",
	    "got \"127.0.0.1:1\" again (first at "
	    "listen.tcp[0])");
	expect_error(f, "listen-elem-int.conf",
	    "listen = {\n  tcp = ( 10809 );\n};\n" EXPORTS_OK, 2,
	    "listen.tcp[0]", "or a group such as { address = ");
}

static void
test_metrics_endpoint_is_off_unless_listen_is_set(void **state)
{
	struct fixture *f = *state;

	load_ok(f,
	    write_conf(f, "no-metrics.conf", "metrics = { };\n" EXPORTS_OK));
	assert_null(f->cfg.metrics.listen);
	config_free(&f->cfg);
	load_ok(f,
	    write_conf(f, "metrics.conf",
		"metrics = { listen = \"127.0.0.1:9712\"; };\n" EXPORTS_OK));
	assert_string_equal(f->cfg.metrics.listen, "127.0.0.1:9712");
	config_free(&f->cfg);
	expect_error(f, "metrics-bad.conf",
	    "metrics = {\n  listen = \"9712\";\n};\n" EXPORTS_OK, 2,
	    "metrics.listen", "expected \"host:port\"");
}

static void
test_unix_only_listener_drops_the_tcp_default(void **state)
{
	struct fixture *f = *state;

	load_ok(f, write_conf(f, "unix-only.conf",
	    "listen = { unix = [ \"/run/wbd/nbd.sock\" ]; };\n" EXPORTS_OK));
	assert_int_equal(f->cfg.n_listen_tcp, 0);
	assert_int_equal(f->cfg.n_listen_unix, 1);
}

static void
test_every_cache_mode_and_readonly(void **state)
{
	struct fixture *f = *state;
	struct wbd_config *c = &f->cfg;

	load_ok(f, write_conf(f, "modes.conf",
	    "exports = (\n"
	    "  { name = \"wb\"; backing = \"/a\"; cache_mode = \"writeback\"; },\n"
	    "  { name = \"wt\"; backing = \"/b\"; cache_mode = \"writethrough\";\n"
	    "    readonly = true; description = \"read only\"; },\n"
	    "  { name = \"wtuf\"; backing = \"/c\";\n"
	    "    cache_mode = \"writethrough-until-flush\"; }\n"
	    ");\n"));
	assert_int_equal(c->n_exports, 3);
	assert_int_equal(c->exports[0].cache_mode, CACHE_WRITEBACK);
	assert_int_equal(c->exports[1].cache_mode, CACHE_WRITETHROUGH);
	assert_int_equal(c->exports[2].cache_mode,
	    CACHE_WRITETHROUGH_UNTIL_FLUSH);
	assert_false(c->exports[0].readonly);
	assert_true(c->exports[1].readonly);
	assert_string_equal(c->exports[1].description, "read only");
	assert_int_equal(c->exports[1].line, 3);
	assert_int_equal(c->exports[2].line, 5);
}

static void
test_direct_is_per_export_and_off_by_default(void **state)
{
	struct fixture *f = *state;
	struct wbd_config *c = &f->cfg;

	load_ok(f, write_conf(f, "direct.conf",
	    "exports = (\n"
	    "  { name = \"on\"; backing = \"/dev/sdb\"; direct = true; },\n"
	    "  { name = \"off\"; backing = \"/a\"; direct = false; },\n"
	    "  { name = \"unset\"; backing = \"/b\"; },\n"
	    "  { name = \"remote\"; backing = \"nbd://host/x\"; direct = false; }\n"
	    ");\n"));
	assert_int_equal(c->n_exports, 4);
	assert_true(c->exports[0].direct);
	assert_false(c->exports[1].direct);
	assert_false(c->exports[2].direct);
	assert_false(c->exports[3].direct);
}

static void
test_include_is_relative_to_the_file(void **state)
{
	struct fixture *f = *state;

	write_conf(f, "exports.inc", EXPORTS_OK);
	load_ok(f, write_conf(f, "main.conf",
	    "io_threads = 2;\n"
	    "@include \"exports.inc\"\n"));
	assert_int_equal(f->cfg.io_threads, 2);
	assert_int_equal(f->cfg.n_exports, 1);
}

static void
test_cache_mode_names_round_trip(void **state)
{
	enum cache_mode m;

	assert_int_equal(cache_mode_parse("writeback", &m), 0);
	assert_int_equal(m, CACHE_WRITEBACK);
	assert_int_equal(cache_mode_parse("writethrough", &m), 0);
	assert_int_equal(m, CACHE_WRITETHROUGH);
	assert_int_equal(cache_mode_parse("writethrough-until-flush", &m), 0);
	assert_int_equal(m, CACHE_WRITETHROUGH_UNTIL_FLUSH);
	for (m = CACHE_WRITEBACK; m <= CACHE_WRITETHROUGH_UNTIL_FLUSH; m++) {
		enum cache_mode back;

		assert_int_equal(cache_mode_parse(cache_mode_name(m), &back), 0);
		assert_int_equal(back, m);
	}
	errno = 0;
	assert_int_equal(cache_mode_parse("WriteBack", &m), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(cache_mode_parse("", &m), -1);
}

static void
assert_hostport(const char *s, const char *host, const char *port)
{
	char *h, *p;

	if (config_parse_hostport(s, &h, &p) != 0)
		fail_msg("config_parse_hostport(\"%s\") failed", s);
	assert_string_equal(h, host);
	assert_string_equal(p, port);
	free(h);
	free(p);
}

static void
assert_hostport_invalid(const char *s)
{
	char *h, *p;

	errno = 0;
	if (config_parse_hostport(s, &h, &p) != -1)
		fail_msg("config_parse_hostport(\"%s\") accepted it", s);
	assert_int_equal(errno, EINVAL);
	assert_null(h);
	assert_null(p);
}

static void
test_parse_hostport(void **state)
{
	assert_hostport("127.0.0.1:10809", "127.0.0.1", "10809");
	assert_hostport("localhost:1", "localhost", "1");
	assert_hostport("nbd-server.example.com:65535",
	    "nbd-server.example.com", "65535");
	assert_hostport("[::1]:10809", "::1", "10809");
	assert_hostport("[::]:10809", "::", "10809");
	assert_hostport("[fe80::1%eth0]:10809", "fe80::1%eth0", "10809");

	assert_hostport_invalid("");
	assert_hostport_invalid("127.0.0.1");
	assert_hostport_invalid("127.0.0.1:");
	assert_hostport_invalid(":10809");
	assert_hostport_invalid("127.0.0.1:0");
	assert_hostport_invalid("127.0.0.1:65536");
	assert_hostport_invalid("127.0.0.1:-1");
	assert_hostport_invalid("127.0.0.1:nbd");
	assert_hostport_invalid("127.0.0.1:10809 ");
	assert_hostport_invalid("::1:10809");
	assert_hostport_invalid("[::1]");
	assert_hostport_invalid("[::1]10809");
	assert_hostport_invalid("[]:10809");
	assert_hostport_invalid("[127.0.0.1]:10809");
	assert_hostport_invalid("[fe80::1%]:10809");
	assert_hostport_invalid("host name:10809");
}

/* ---- One test per kind of mistake. ---- */

static void
test_error_missing_file(void **state)
{
	struct fixture *f = *state;
	char want[256];

	snprintf(f->path, sizeof f->path, "%s/absent.conf", f->dir);
	errno = 0;
	assert_int_equal(config_load(f->path, &f->cfg, f->err, sizeof f->err),
	    -1);
	assert_int_equal(errno, ENOENT);
	snprintf(want, sizeof want, "%s: cannot open: No such file or "
	    "directory", f->path);
	assert_string_equal(f->err, want);
	assert_null(f->cfg.path);
}

static void
test_error_directory_instead_of_file(void **state)
{
	struct fixture *f = *state;
	char want[256];

	assert_int_equal(config_load(f->dir, &f->cfg, f->err, sizeof f->err),
	    -1);
	snprintf(want, sizeof want, "%s: cannot open: Is a directory", f->dir);
	assert_string_equal(f->err, want);
}

static void
test_error_syntax(void **state)
{
	/* A size must be quoted: 10G is not a libconfig value. */
	expect_error(*state, "syntax.conf",
	    "exports = (\n"
	    "  { name = \"d\"; backing = \"/d\";\n"
	    "    size = 10G; }\n"
	    ");\n",
	    3, NULL, "syntax error");
}

static void
test_error_key_given_twice(void **state)
{
	expect_error(*state, "twice.conf",
	    "io_threads = 1;\n"
	    "io_threads = 2;\n" EXPORTS_OK,
	    2, NULL, "duplicate setting name");
}

static void
test_error_in_included_file_names_that_file(void **state)
{
	struct fixture *f = *state;

	write_conf(f, "bad.inc",
	    "# line 1\n"
	    "io_threads = \"many\";\n");
	expect_error_in(f, "includer.conf",
	    "@include \"bad.inc\"\n" EXPORTS_OK,
	    "bad.inc", 2, "io_threads", "expected an integer from 0 to 1024, "
	    "got \"many\"");
}

static void
test_error_unknown_top_level_key_suggests_the_right_one(void **state)
{
	expect_error(*state, "typo-top.conf",
	    EXPORTS_OK
	    "listne = { tcp = [ \"127.0.0.1:10809\" ]; };\n",
	    2, "listne", "unknown key; did you mean listen?");
}

static void
test_error_unknown_key_lists_the_known_ones(void **state)
{
	expect_error(*state, "unknown-top.conf",
	    "colour = \"blue\";\n" EXPORTS_OK, 1, "colour",
	    "unknown key; expected one of: listen, io_threads, io_threads_batch, "
	    "cache, writeback, control, remote, limits, memory, tls, metrics, "
	    "user, group, journal, exports");
}

static void
test_error_unknown_key_in_export(void **state)
{
	expect_error(*state, "typo-export.conf",
	    "exports = (\n"
	    "  { name = \"d\";\n"
	    "    bakcing = \"/d\"; }\n"
	    ");\n",
	    3, "exports[0].bakcing", "unknown key; did you mean backing?");
}

static void
test_error_unknown_key_in_writeback(void **state)
{
	expect_error(*state, "typo-writeback.conf",
	    "writeback = {\n"
	    "  dirty_ratio = 30;\n"
	    "  dirty_expire_centisec = 100;\n"
	    "};\n" EXPORTS_OK,
	    3, "writeback.dirty_expire_centisec",
	    "did you mean dirty_expire_centisecs?");
}

static void
test_error_unknown_key_in_cache(void **state)
{
	expect_error(*state, "typo-cache.conf",
	    "cache = { size = \"1G\"; pagesize = \"4K\"; };\n" EXPORTS_OK,
	    1, "cache.pagesize", "did you mean page_size?");
}

static void
test_error_unknown_key_in_listen(void **state)
{
	expect_error(*state, "typo-listen.conf",
	    "listen = {\n"
	    "  tcp6 = [ \"[::1]:10809\" ];\n"
	    "};\n" EXPORTS_OK,
	    2, "listen.tcp6", "did you mean tcp?");
}

static void
test_error_bool_where_size_expected(void **state)
{
	expect_error(*state, "size-bool.conf",
	    "exports = (\n"
	    "  { name = \"d\"; backing = \"/d\";\n"
	    "    size = true; }\n"
	    ");\n",
	    3, "exports[0].size",
	    "expected a size such as \"512M\" or \"10G\", got true");
}

static void
test_error_string_where_bool_expected(void **state)
{
	expect_error(*state, "readonly-string.conf",
	    "exports = (\n"
	    "  { name = \"d\"; backing = \"/d\";\n"
	    "    readonly = \"yes\"; }\n"
	    ");\n",
	    3, "exports[0].readonly", "expected true or false, got \"yes\"");
}

static void
test_error_direct_not_a_bool(void **state)
{
	expect_error(*state, "direct-int.conf",
	    "exports = (\n"
	    "  { name = \"d\"; backing = \"/d\";\n"
	    "    direct = 1; }\n"
	    ");\n",
	    3, "exports[0].direct", "expected true or false, got 1");
}

static void
test_memory_lock(void **state)
{
	struct fixture *f = *state;

	load_ok(f, write_conf(f, "memory-default.conf", EXPORTS_OK));
	assert_false(f->cfg.memory.lock);
	config_free(&f->cfg);
	load_ok(f,
	    write_conf(f, "memory-lock.conf",
		"memory = { lock = true; };\n" EXPORTS_OK));
	assert_true(f->cfg.memory.lock);
	config_free(&f->cfg);
	expect_error(f, "memory-lock-int.conf",
	    "memory = { lock = 1; };\n" EXPORTS_OK, 1, "memory.lock",
	    "expected true or false, got 1");
}

static void
test_error_direct_with_an_nbd_backing(void **state)
{
	struct fixture *f = *state;

	expect_error(f, "direct-nbd.conf",
	    "exports = (\n"
	    "  { name = \"d\"; backing = \"/d\"; direct = true; },\n"
	    "  { name = \"r\"; backing = \"nbd://server/disk\";\n"
	    "    direct = true; }\n"
	    ");\n",
	    4, "exports[1].direct",
	    "expected false with an NBD backing (\"nbd://server/disk\"), "
	    "got true");
	config_free(&f->cfg);
	expect_error(f, "direct-nbd-unix.conf",
	    "exports = ( { name = \"r\"; direct = true;\n"
	    "  backing = \"nbd+unix:///disk?socket=/run/s.sock\"; } );\n",
	    1, "exports[0].direct", "NBD backing");
}

static void
test_error_unknown_key_near_direct(void **state)
{
	expect_error(*state, "typo-direct.conf",
	    "exports = ( { name = \"d\"; backing = \"/d\"; dierct = true; } );\n",
	    1, "exports[0].dierct", "unknown key; did you mean direct?");
}

static void
test_error_number_where_string_expected(void **state)
{
	expect_error(*state, "name-number.conf",
	    "exports = ( { name = 7; backing = \"/d\"; } );\n",
	    1, "exports[0].name", "expected a string, got 7");
}

static void
test_error_scalar_where_group_expected(void **state)
{
	expect_error(*state, "cache-scalar.conf",
	    "cache = \"1G\";\n" EXPORTS_OK,
	    1, "cache", "expected a group such as cache = { ... };, got \"1G\"");
}

static void
test_error_float_where_integer_expected(void **state)
{
	expect_error(*state, "float.conf",
	    "writeback = { dirty_ratio = 20.5; };\n" EXPORTS_OK,
	    1, "writeback.dirty_ratio",
	    "expected an integer from 0 to 100, got 20.5");
}

static void
test_error_bad_size_suffix(void **state)
{
	expect_error(*state, "bad-size.conf",
	    "exports = (\n"
	    "  { name = \"a\"; backing = \"/a\"; },\n"
	    "  { name = \"b\"; backing = \"/b\";\n"
	    "    size = \"10Q\"; }\n"
	    ");\n",
	    4, "exports[1].size",
	    "expected a size such as \"512M\" or \"10G\", got \"10Q\"");
}

static void
test_error_size_too_large(void **state)
{
	expect_error(*state, "size-erange.conf",
	    "exports = ( { name = \"d\"; backing = \"/d\";\n"
	    "              size = \"99999E\"; } );\n",
	    2, "exports[0].size", "expected a size below 16E, got \"99999E\"");
}

static void
test_error_negative_size(void **state)
{
	expect_error(*state, "size-negative.conf",
	    "exports = ( { name = \"d\"; backing = \"/d\"; size = -1; } );\n",
	    1, "exports[0].size", "got -1");
}

/* libconfig 1.5 would read this as 1G: it must not pass silently. */
static void
test_error_integer_truncated_by_libconfig(void **state)
{
	expect_error(*state, "int-overflow.conf",
	    "exports = (\n"
	    "  { name = \"d\"; backing = \"/d\";\n"
	    "    # 5368709120 in a comment does not count\n"
	    "    readonly = false; size = 5368709120; }\n"
	    ");\n",
	    4, "exports[0].size", "expected an integer that fits in 32 bits, "
	    "got 5368709120");
}

static void
test_error_bad_cache_mode(void **state)
{
	expect_error(*state, "cache-mode.conf",
	    "exports = (\n"
	    "  { name = \"d\"; backing = \"/d\"; cache_mode = \"write-back\"; }\n"
	    ");\n",
	    2, "exports[0].cache_mode", "expected \"writeback\", "
	    "\"writethrough\" or \"writethrough-until-flush\", got "
	    "\"write-back\"");
}

static void
test_error_duplicate_export_name(void **state)
{
	expect_error(*state, "dup-name.conf",
	    "exports = (\n"
	    "  { name = \"disk0\"; backing = \"/a\"; },\n"
	    "  { backing = \"/b\";\n"
	    "    name = \"disk0\"; }\n"
	    ");\n",
	    4, "exports[1].name", "got \"disk0\" again (first at exports[0], "
	    "line 2)");
}

static void
test_default_export(void **state)
{
	struct fixture *f = *state;

	load_ok(f,
	    write_conf(f, "default.conf",
		"exports = ( { name = \"a\"; backing = \"/a\"; },\n"
		"            { name = \"b\"; backing = \"/b\"; } );\n"
		"default_export = \"b\";\n"));
	assert_string_equal(f->cfg.default_export, "b");
	config_free(&f->cfg);
	load_ok(f,
	    write_conf(f, "none.conf",
		"default_export = \"none\";\n"
		"exports = ( { name = \"a\"; backing = \"/a\"; } );\n"));
	assert_string_equal(f->cfg.default_export, CONFIG_NO_DEFAULT_EXPORT);
	config_free(&f->cfg);
	load_ok(f,
	    write_conf(f, "first.conf",
		"exports = ( { name = \"a\"; backing = \"/a\"; } );\n"));
	assert_null(f->cfg.default_export);
}

/* journal = { dir; ... } at the top level: a log per writable export,
 * a file named after it, unless its own group says otherwise. */
static void
test_journal_dir(void **state)
{
	struct fixture *f = *state;
	const struct export_conf *ex;

	load_ok(f,
	    write_conf(f, "jdir.conf",
		"journal = { dir = \"/var/lib/wbd/j\"; size = \"64M\"; "
		"mode = \"on-write\"; };\n"
		"exports = ( { name = \"disk0\"; backing = \"/a\"; },\n"
		"  { name = \"vm/../root\"; backing = \"/b\";\n"
		"    journal = { ordered = true; }; },\n"
		"  { name = \"own\"; backing = \"/c\";\n"
		"    journal = { path = \"/x/own.wal\"; mode = \"on-flush\"; }; },\n"
		"  { name = \"ro\"; backing = \"/d\"; readonly = true; },\n"
		"  { name = \"off\"; backing = \"/e\"; journal = false; },\n"
		"  { name = \"..\"; backing = \"/f\"; } );\n"));
	assert_string_equal(f->cfg.journal.dir, "/var/lib/wbd/j");
	assert_int_equal(f->cfg.journal.dir_at.line, 1);
	assert_int_equal(f->cfg.n_exports, 6);
	ex = &f->cfg.exports[0];
	assert_string_equal(ex->journal.path, "/var/lib/wbd/j/disk0.wal");
	assert_string_equal(ex->journal.dir, "/var/lib/wbd/j");
	assert_int_equal(ex->journal.size_bytes, 64 * MiB);
	assert_int_equal(ex->journal.mode, JOURNAL_ON_WRITE);
	assert_false(ex->journal.ordered);
	assert_int_equal(ex->journal.path_at.line, 1);
	/* '/' never reaches past the directory. */
	ex = &f->cfg.exports[1];
	assert_string_equal(ex->journal.path,
	    "/var/lib/wbd/j/vm%2F..%2Froot.wal");
	assert_true(ex->journal.ordered);
	assert_int_equal(ex->journal.mode, JOURNAL_ON_WRITE);
	ex = &f->cfg.exports[2];
	assert_string_equal(ex->journal.path, "/x/own.wal");
	assert_null(ex->journal.dir);
	assert_int_equal(ex->journal.mode, JOURNAL_ON_FLUSH);
	assert_int_equal(ex->journal.size_bytes, 64 * MiB);
	assert_null(f->cfg.exports[3].journal.path); /* read-only */
	assert_null(f->cfg.exports[4].journal.path); /* journal = false */
	/* Nor does a leading '.'. */
	assert_string_equal(f->cfg.exports[5].journal.path,
	    "/var/lib/wbd/j/%2E..wal");
	config_free(&f->cfg);

	/* Without dir: defaults for the exports' groups only. */
	load_ok(f,
	    write_conf(f, "jdefaults.conf",
		"journal = { size = \"32M\"; ordered = true; };\n"
		"exports = ( { name = \"a\"; backing = \"/a\"; },\n"
		"  { name = \"b\"; backing = \"/b\";\n"
		"    journal = { path = \"/j/b.wal\"; }; } );\n"));
	assert_null(f->cfg.exports[0].journal.path);
	assert_string_equal(f->cfg.exports[1].journal.path, "/j/b.wal");
	assert_int_equal(f->cfg.exports[1].journal.size_bytes, 32 * MiB);
	assert_true(f->cfg.exports[1].journal.ordered);
}

/* journal.state_dir: the top level's for every log, an export's own over
 * it; without, journal.dir (for a block device's state file only). */
static void
test_journal_state_dir(void **state)
{
	static const struct {
		const char *top, *own;   /* the groups' state_dir keys */
		const char *dir, *where; /* what the export's log has */
		bool set;
		int line;
	} cases[] = {
		{ "state_dir = \"/var/lib/wbd\";", "", "/var/lib/wbd",
		    "top level", true, 1 },
		{ "state_dir = \"/var/lib/wbd\";", "state_dir = \"/srv/s\";",
		    "/srv/s", "its own", true, 3 },
		{ "", "", "/j", "journal.dir", false, 1 },
	};
	struct fixture *f = *state;
	char text[512];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(text, sizeof text,
		    "journal = { dir = \"/j\"; %s };\n"
		    "exports = ( { name = \"a\"; backing = \"/a\";\n"
		    "  journal = { path = \"/dev/sdb1\"; size = 0; %s }; } );\n",
		    cases[i].top, cases[i].own);
		load_ok(f, write_conf(f, "jstate.conf", text));
		const struct export_journal_conf *jc =
		    &f->cfg.exports[0].journal;
		if (!jc->state_dir ||
		    strcmp(jc->state_dir, cases[i].dir) != 0 ||
		    jc->state_dir_set != cases[i].set ||
		    (int)jc->state_dir_at.line != cases[i].line)
			fail_msg("state_dir from the %s: got %s (set %d, line "
				 "%u)",
			    cases[i].where,
			    jc->state_dir ? jc->state_dir : "none",
			    jc->state_dir_set, jc->state_dir_at.line);
		config_free(&f->cfg);
	}
	load_ok(f,
	    write_conf(f, "jstate-none.conf",
		"exports = ( { name = \"a\"; backing = \"/a\";\n"
		"    journal = { path = \"/x/a.wal\"; }; } );\n"));
	assert_null(f->cfg.exports[0].journal.state_dir);
	config_free(&f->cfg);

	expect_error(f, "jstate-relative.conf",
	    "journal = { state_dir = \"state\"; };\n" EXPORTS_OK, 1,
	    "journal.state_dir", "expected state_dir = \"/absolute/path\"");
	expect_error(f, "jstate-export-not-string.conf",
	    "exports = ( { name = \"d\"; backing = \"/d\";\n"
	    "  journal = { path = \"/d.wal\"; state_dir = 1; }; } );\n",
	    2, "exports[0].journal.state_dir", "expected");
}

/* The names of journal.dir's files: one file per name, and never a path
 * out of the directory, whatever the bytes. */
static void
test_journal_file_names(void **state)
{
	char a[CONFIG_JOURNAL_FILE_MAX + 1], b[CONFIG_JOURNAL_FILE_MAX + 1];
	char name[4097];

	(void)state;
	config_journal_file("disk0", a, sizeof a);
	assert_string_equal(a, "disk0.wal");
	config_journal_file("a b%c/\xc3\xa9.", a, sizeof a);
	assert_string_equal(a, "a%20b%25c%2F%C3%A9..wal");
	config_journal_file(".", a, sizeof a);
	assert_string_equal(a, "%2E.wal");
	/* "%2F" itself is not '/': its '%' is written too. */
	config_journal_file("%2F", a, sizeof a);
	config_journal_file("/", b, sizeof b);
	assert_string_not_equal(a, b);
	/* Long names: cut, never inside a %XX, with a hash of the whole. */
	memset(name, '/', 4096);
	name[4096] = '\0';
	config_journal_file(name, a, sizeof a);
	name[4095] = 'x';
	config_journal_file(name, b, sizeof b);
	assert_true(strlen(a) <= CONFIG_JOURNAL_FILE_MAX);
	assert_true(strlen(a) <= 255);
	assert_string_not_equal(a, b);
	assert_int_equal(strncmp(a, b, CONFIG_JOURNAL_NAME_CUT - 3), 0);
	assert_non_null(strchr(a, '~'));
	assert_null(strchr(a, '/'));
	const char *tilde = strchr(a, '~');
	assert_int_equal((tilde - a) % 3, 0); /* whole "%2F"s before it */
	/* A short name never has a '~'. */
	config_journal_file("~", a, sizeof a);
	assert_string_equal(a, "%7E.wal");
}

static void
test_journal_dir_errors(void **state)
{
	struct fixture *f = *state;

	expect_error(f, "jdir-relative.conf",
	    "journal = { dir = \"logs\"; };\n" EXPORTS_OK, 1, "journal.dir",
	    "expected dir = \"/absolute/path\"");
	expect_error(f, "jdir-not-group.conf",
	    "journal = \"/var/lib/wbd\";\n" EXPORTS_OK, 1, "journal",
	    "expected a group such as journal = { dir = ");
	expect_error(f, "jdir-unknown.conf",
	    "journal = { path = \"/x\"; };\n" EXPORTS_OK, 1, "journal.path",
	    "unknown key");
	expect_error(f, "jdir-bad-mode.conf",
	    "journal = { dir = \"/j\"; mode = \"always\"; };\n" EXPORTS_OK, 1,
	    "journal.mode", "expected \"on-flush\" or \"on-write\"");
	/* An export's group without a path, and no dir. */
	expect_error(f, "jdir-no-path.conf",
	    "exports = ( { name = \"d\"; backing = \"/d\";\n"
	    "  journal = { size = \"16M\"; }; } );\n",
	    2, "exports[0].journal", "(or journal.dir at the top level)");
	expect_error(f, "jdir-export-true.conf",
	    "journal = { dir = \"/j\"; };\n"
	    "exports = ( { name = \"d\"; backing = \"/d\"; journal = true; } "
	    ");\n",
	    2, "exports[0].journal", "or false for no log");
	/* An export's own path that is another's file in the directory. */
	expect_error(f, "jdir-same-file.conf",
	    "journal = { dir = \"/j\"; };\n"
	    "exports = ( { name = \"d\"; backing = \"/d\"; },\n"
	    "  { name = \"e\"; backing = \"/e\";\n"
	    "    journal = { path = \"/j/d.wal\"; }; } );\n",
	    4, "exports[1].journal.path",
	    "expected a journal path no other export uses, got \"/j/d.wal\"");
}

static void
test_max_request_bytes(void **state)
{
	struct fixture *f = *state;

	load_ok(f,
	    write_conf(f, "mrb.conf",
		"limits = { max_request_bytes = \"128M\"; };\n"
		"exports = ( { name = \"a\"; backing = \"/a\"; } );\n"));
	assert_int_equal(f->cfg.limits.max_request_bytes, 128u << 20);
	config_free(&f->cfg);
	load_ok(f,
	    write_conf(f, "mrb-default.conf",
		"exports = ( { name = \"a\"; backing = \"/a\"; } );\n"));
	assert_int_equal(f->cfg.limits.max_request_bytes, 64u << 20);
	config_free(&f->cfg);
	expect_error(f, "mrb-small.conf",
	    "limits = {\n  max_request_bytes = \"16M\";\n};\n"
	    "exports = ( { name = \"a\"; backing = \"/a\"; } );\n",
	    2, "limits.max_request_bytes", "expected a size from 32M to 1G");
	expect_error(f, "mrb-big.conf",
	    "limits = { max_request_bytes = \"2G\"; };\n"
	    "exports = ( { name = \"a\"; backing = \"/a\"; } );\n",
	    1, "limits.max_request_bytes", "expected a size from 32M to 1G");
}

/* What one connection may hold, and the handshake timeout. */
static void
test_connection_limits(void **state)
{
	struct fixture *f = *state;

	load_ok(f,
	    write_conf(f, "cl-default.conf",
		"exports = ( { name = \"a\"; backing = \"/a\"; } );\n"));
	assert_int_equal(f->cfg.limits.max_requests_per_connection, 256);
	assert_int_equal(f->cfg.limits.max_inflight_bytes_per_connection,
	    64u << 20);
	assert_int_equal(f->cfg.limits.handshake_timeout_s, 30);
	assert_int_equal(f->cfg.limits.client_ipv6_prefix, 128);
	assert_int_equal(f->cfg.limits.reserved_connections, 64);
	assert_int_equal(f->cfg.limits.idle_timeout_s, 6 * 3600);
	assert_int_equal(f->cfg.limits.local_idle_timeout_s, 0);
	assert_int_equal(f->cfg.control.max_clients, 64);
	assert_int_equal(f->cfg.control.max_clients_per_uid, 16);
	assert_int_equal(f->cfg.control.admin_reserved, 8);
	assert_int_equal(f->cfg.control.idle_timeout_s, 60);
	assert_int_equal(f->cfg.metrics.max_connections, 32);
	assert_int_equal(f->cfg.metrics.max_connections_per_client, 4);
	assert_int_equal(f->cfg.metrics.timeout_s, 10);
	config_free(&f->cfg);
	load_ok(f,
	    write_conf(f, "cl.conf",
		"limits = { max_requests_per_connection = 4;\n"
		"  max_inflight_bytes_per_connection = \"2M\";\n"
		"  handshake_timeout_s = 1; };\n"
		"exports = ( { name = \"a\"; backing = \"/a\"; } );\n"));
	assert_int_equal(f->cfg.limits.max_requests_per_connection, 4);
	assert_int_equal(f->cfg.limits.max_inflight_bytes_per_connection,
	    2u << 20);
	assert_int_equal(f->cfg.limits.handshake_timeout_s, 1);
	config_free(&f->cfg);
	/* An export's own idle timeout, or the limits group's. */
	load_ok(f,
	    write_conf(f, "cl-idle.conf",
		"exports = ( { name = \"a\"; backing = \"/a\"; "
		"idle_timeout_s = 0; },\n"
		"  { name = \"b\"; backing = \"/b\"; } );\n"));
	assert_true(f->cfg.exports[0].idle_timeout_set);
	assert_int_equal(f->cfg.exports[0].idle_timeout_s, 0);
	assert_false(f->cfg.exports[1].idle_timeout_set);
	config_free(&f->cfg);
	expect_error(f, "cl-idle2.conf",
	    "exports = ( { name = \"a\"; backing = \"/a\";\n"
	    "  idle_timeout_s = 86401; } );\n",
	    2, "exports[0].idle_timeout_s", "0 to 86400");
	/* The reserve not given: at most max_connections / 16. */
	load_ok(f,
	    write_conf(f, "cl-res.conf",
		"limits = { max_connections = 100; };\n"
		"exports = ( { name = \"a\"; backing = \"/a\"; } );\n"));
	assert_int_equal(f->cfg.limits.reserved_connections, 6);
	config_free(&f->cfg);
	load_ok(f,
	    write_conf(f, "cl-res2.conf",
		"limits = { max_connections = 100; reserved_connections = 99; "
		"};\n"
		"exports = ( { name = \"a\"; backing = \"/a\"; } );\n"));
	assert_int_equal(f->cfg.limits.reserved_connections, 99);
	config_free(&f->cfg);
	expect_error(f, "cl-res3.conf",
	    "limits = {\n  max_connections = 8;\n"
	    "  reserved_connections = 8;\n};\n"
	    "exports = ( { name = \"a\"; backing = \"/a\"; } );\n",
	    3, "limits.reserved_connections",
	    "must be less than max_connections (8)");
	expect_error(f, "cl-req.conf",
	    "limits = {\n  max_requests_per_connection = 0;\n};\n"
	    "exports = ( { name = \"a\"; backing = \"/a\"; } );\n",
	    2, "limits.max_requests_per_connection", "1 to 65536");
	expect_error(f, "cl-bytes.conf",
	    "limits = { max_inflight_bytes_per_connection = \"512K\"; };\n"
	    "exports = ( { name = \"a\"; backing = \"/a\"; } );\n",
	    1, "limits.max_inflight_bytes_per_connection",
	    "expected a size from 1M to 1G");
	expect_error(f, "cl-hs.conf",
	    "limits = { handshake_timeout_s = 0; };\n"
	    "exports = ( { name = \"a\"; backing = \"/a\"; } );\n",
	    1, "limits.handshake_timeout_s", "1 to 3600");
	expect_error(f, "cl-v6.conf",
	    "limits = { client_ipv6_prefix = 129; };\n"
	    "exports = ( { name = \"a\"; backing = \"/a\"; } );\n",
	    1, "limits.client_ipv6_prefix", "1 to 128");
	expect_error(f, "cl-ctl.conf",
	    "control = { max_clients = 4;\n  admin_reserved = 4; };\n"
	    "exports = ( { name = \"a\"; backing = \"/a\"; } );\n",
	    2, "control.admin_reserved", "less than max_clients");
	expect_error(f, "cl-metrics.conf",
	    "metrics = { max_connections_per_client = 0; };\n"
	    "exports = ( { name = \"a\"; backing = \"/a\"; } );\n",
	    1, "metrics.max_connections_per_client", "1 to 1024");
}

static void
test_readahead_bytes(void **state)
{
	struct fixture *f = *state;

	load_ok(f,
	    write_conf(f, "ra.conf",
		"cache = { readahead_bytes = \"1M\"; };\n"
		"exports = ( { name = \"a\"; backing = \"/a\"; } );\n"));
	assert_int_equal(f->cfg.cache.readahead_bytes, 1u << 20);
	config_free(&f->cfg);
	load_ok(f,
	    write_conf(f, "ra-off.conf",
		"cache = { readahead_bytes = 0; };\n"
		"exports = ( { name = \"a\"; backing = \"/a\"; } );\n"));
	assert_int_equal(f->cfg.cache.readahead_bytes, 0);
	config_free(&f->cfg);
	load_ok(f,
	    write_conf(f, "ra-default.conf",
		"exports = ( { name = \"a\"; backing = \"/a\"; } );\n"));
	assert_int_equal(f->cfg.cache.readahead_bytes, 4u << 20);
	config_free(&f->cfg);
	expect_error(f, "ra-big.conf",
	    "cache = {\n  readahead_bytes = \"65M\";\n};\n"
	    "exports = ( { name = \"a\"; backing = \"/a\"; } );\n",
	    2, "cache.readahead_bytes", "expected a size from 0 (off) to 64M");
}

/*
 * The remote group's integer settings: each one's default, a good value
 * (not the default) that loads, and bad values refused with the file,
 * the line and the key, the message giving the range.
 */
#define REMOTE_BAD_MAX 2
static const struct remote_uint_case {
	const char *key;
	size_t offset; /* of the unsigned in struct remote_conf */
	unsigned def, good;
	unsigned bad[REMOTE_BAD_MAX];
	unsigned n_bad;
	const char *range; /* in "expected an integer from RANGE, got" */
} remote_uint_cases[] = {
	{ "unflushed_ranges", offsetof(struct remote_conf, unflushed_ranges),
	    1024, 16, { 0 }, 1, "1 to 65536" },
	{ "commit_interval_ms",
	    offsetof(struct remote_conf, commit_interval_ms), 50, 0, { 60001 },
	    1, "0 to 60000" },
	{ "conn_depth", offsetof(struct remote_conf, conn_depth), 16, 1,
	    { 0, 257 }, 2, "1 to 256" },
	{ "fua_max_runs", offsetof(struct remote_conf, fua_max_runs), 64, 0,
	    { 4097 }, 1, "0 to 4096" },
};

/* The setting C loaded as WANT. */
static void
expect_remote_uint(const struct fixture *f, const struct remote_uint_case *c,
    unsigned want)
{
	unsigned got =
	    *(const unsigned *)((const char *)&f->cfg.remote + c->offset);

	if (got != want)
		fail_msg("remote.%s is %u, expected %u", c->key, got, want);
}

static void
check_remote_uint(struct fixture *f, const struct remote_uint_case *c)
{
	char name[64], text[256], key[64], what[128];

	assert_true(c->good != c->def);
	assert_in_range(c->n_bad, 1, REMOTE_BAD_MAX);
	snprintf(name, sizeof name, "%s-default.conf", c->key);
	load_ok(f,
	    write_conf(f, name,
		"exports = ( { name = \"a\"; backing = \"/a\"; } );\n"));
	expect_remote_uint(f, c, c->def);
	config_free(&f->cfg);
	snprintf(name, sizeof name, "%s-good.conf", c->key);
	snprintf(text, sizeof text,
	    "remote = { %s = %u; };\n"
	    "exports = ( { name = \"a\"; backing = \"/a\"; } );\n",
	    c->key, c->good);
	load_ok(f, write_conf(f, name, text));
	expect_remote_uint(f, c, c->good);
	config_free(&f->cfg);
	snprintf(key, sizeof key, "remote.%s", c->key);
	/* The I-th bad value on line 2 + I, after I blank lines. */
	for (unsigned i = 0; i < c->n_bad; i++) {
		snprintf(name, sizeof name, "%s-bad%u.conf", c->key, i);
		snprintf(text, sizeof text,
		    "remote = {\n%.*s  %s = %u;\n};\n"
		    "exports = ( { name = \"a\"; backing = \"/a\"; } );\n",
		    (int)i, "\n\n", c->key, c->bad[i]);
		snprintf(what, sizeof what, "from %s, got %u", c->range,
		    c->bad[i]);
		expect_error(f, name, text, 2 + (int)i, key, what);
	}
}

static void
test_remote_uint_settings(void **state)
{
	size_t n = sizeof remote_uint_cases / sizeof remote_uint_cases[0];

	for (size_t i = 0; i < n; i++)
		check_remote_uint(*state, &remote_uint_cases[i]);
}

static void
test_error_default_export_unknown(void **state)
{
	expect_error(*state, "default-unknown.conf",
	    "exports = (\n"
	    "  { name = \"a\"; backing = \"/a\"; }\n"
	    ");\n"
	    "default_export = \"disk0\";\n",
	    4, "default_export",
	    "expected the name of an export below, or "
	    "\"none\", got \"disk0\"");
	expect_error(*state, "default-int.conf",
	    "default_export = 1;\n"
	    "exports = ( { name = \"a\"; backing = \"/a\"; } );\n",
	    1, "default_export", "expected a string");
}

static void
test_error_missing_name(void **state)
{
	expect_error(*state, "no-name.conf",
	    "exports = (\n"
	    "  { name = \"a\"; backing = \"/a\"; },\n"
	    "  { backing = \"/b\"; }\n"
	    ");\n",
	    3, "exports[1]", "name is missing");
}

static void
test_error_empty_name(void **state)
{
	expect_error(*state, "empty-name.conf",
	    "exports = ( { name = \"\"; backing = \"/a\"; } );\n",
	    1, "exports[0].name", "expected a string of 1 to 4096 bytes, got "
	    "0 bytes");
}

static void
test_error_name_too_long(void **state)
{
	struct fixture *f = *state;
	char text[5000];
	int n;

	n = snprintf(text, sizeof text, "exports = ( { name = \"");
	memset(text + n, 'x', 4097);
	snprintf(text + n + 4097, sizeof text - n - 4097,
	    "\";\n backing = \"/a\"; } );\n");
	expect_error(f, "long-name.conf", text, 1, "exports[0].name",
	    "expected a string of 1 to 4096 bytes, got 4097 bytes");
}

static void
test_error_missing_backing(void **state)
{
	expect_error(*state, "no-backing.conf",
	    "exports = (\n"
	    "  { name = \"d\"; size = \"1G\"; }\n"
	    ");\n",
	    2, "exports[0]", "backing is missing");
}

static void
test_error_no_exports(void **state)
{
	expect_error(*state, "no-exports.conf",
	    "io_threads = 4;\n",
	    0, "exports", "at least one export expected");
}

static void
test_error_empty_exports(void **state)
{
	expect_error(*state, "empty-exports.conf",
	    "io_threads = 4;\n"
	    "exports = ( );\n",
	    2, "exports", "at least one export expected");
}

static void
test_error_exports_not_a_list(void **state)
{
	expect_error(*state, "exports-group.conf",
	    "exports = { name = \"d\"; backing = \"/d\"; };\n",
	    1, "exports", "expected a list of exports");
}

static void
test_error_export_not_a_group(void **state)
{
	expect_error(*state, "export-string.conf",
	    "exports = ( \"disk0\" );\n",
	    1, "exports[0]", "expected an export such as { name = ");
}

static void
test_error_page_size_not_power_of_two(void **state)
{
	expect_error(*state, "page-size.conf",
	    "cache = {\n"
	    "  page_size = 3000;\n"
	    "};\n" EXPORTS_OK,
	    2, "cache.page_size",
	    "expected a power of two from 512 to 1M, got 3000");
}

static void
test_error_page_size_too_large(void **state)
{
	expect_error(*state, "page-size-large.conf",
	    "cache = { page_size = \"2M\"; };\n" EXPORTS_OK,
	    1, "cache.page_size",
	    "expected a power of two from 512 to 1M, got \"2M\"");
}

static void
test_error_cache_smaller_than_a_page(void **state)
{
	expect_error(*state, "cache-tiny.conf",
	    "cache = { size = \"2K\"; };\n" EXPORTS_OK,
	    1, "cache.size", "at least one page of cache.page_size (4K), "
	    "got \"2K\"");
}

static void
test_error_cache_share_out_of_range(void **state)
{
	expect_error(*state, "cache-pct.conf",
	    "cache = { size = \"150%\"; };\n" EXPORTS_OK,
	    1, "cache.size",
	    "expected a share of RAM from 1% to 100%, got \"150%\"");
}

static void
test_error_background_ratio_not_below_dirty_ratio(void **state)
{
	expect_error(*state, "bg-ratio.conf",
	    "writeback = {\n"
	    "  dirty_background_ratio = 30;\n"
	    "  dirty_ratio = 30;\n"
	    "};\n" EXPORTS_OK,
	    2, "writeback.dirty_background_ratio",
	    "expected less than writeback.dirty_ratio (30), got 30");
}

static void
test_error_dirty_ratio_below_default_background(void **state)
{
	expect_error(*state, "dirty-ratio-low.conf",
	    "writeback = { dirty_ratio = 5; };\n" EXPORTS_OK,
	    1, "writeback.dirty_ratio", "expected more than "
	    "writeback.dirty_background_ratio (10, the default), got 5");
}

static void
test_error_background_bytes_not_below_dirty_bytes(void **state)
{
	expect_error(*state, "bg-bytes.conf",
	    "writeback = {\n"
	    "  dirty_bytes = \"64M\";\n"
	    "  dirty_background_bytes = \"128M\";\n"
	    "};\n" EXPORTS_OK,
	    3, "writeback.dirty_background_bytes",
	    "expected less than writeback.dirty_bytes (64M), got 128M");
}

static void
test_error_background_bytes_not_below_dirty_ratio(void **state)
{
	/* 20% of the 256M default cache is 51.2M. */
	expect_error(*state, "bg-mixed.conf",
	    "writeback = { dirty_background_bytes = \"64M\"; };\n" EXPORTS_OK,
	    1, "writeback.dirty_background_bytes",
	    "expected less than writeback.dirty_ratio (20% of the cache, "
	    "51.2 MiB, the default), got 64M");
}

static void
test_error_ratio_and_bytes_both_given(void **state)
{
	expect_error(*state, "both.conf",
	    "writeback = {\n"
	    "  dirty_ratio = 20;\n"
	    "  dirty_bytes = \"64M\";\n"
	    "};\n" EXPORTS_OK,
	    3, "writeback.dirty_bytes",
	    "expected either dirty_ratio or dirty_bytes, not both");
}

static void
test_error_ratio_above_100(void **state)
{
	expect_error(*state, "ratio-101.conf",
	    "writeback = { dirty_ratio = 101; };\n" EXPORTS_OK,
	    1, "writeback.dirty_ratio",
	    "expected an integer from 0 to 100, got 101");
}

static void
test_error_min_workers_above_max_workers(void **state)
{
	expect_error(*state, "workers.conf",
	    "writeback = {\n"
	    "  min_workers = 8;\n"
	    "  max_workers = 4;\n"
	    "};\n" EXPORTS_OK,
	    3, "writeback.max_workers",
	    "expected at least writeback.min_workers (8), got 4");
}

static void
test_error_min_workers_above_default_max(void **state)
{
	expect_error(*state, "min-workers.conf",
	    "writeback = { min_workers = 16; };\n" EXPORTS_OK,
	    1, "writeback.min_workers",
	    "expected at most writeback.max_workers (8, the default), got 16");
}

static void
test_error_too_many_workers(void **state)
{
	expect_error(*state, "workers-65.conf",
	    "writeback = { max_workers = 65; };\n" EXPORTS_OK,
	    1, "writeback.max_workers",
	    "expected an integer from 1 to 64, got 65");
}

static void
test_error_max_io_below_page_size(void **state)
{
	expect_error(*state, "max-io.conf",
	    "cache = { page_size = \"64K\"; };\n"
	    "writeback = { max_io_bytes = \"32K\"; };\n" EXPORTS_OK,
	    2, "writeback.max_io_bytes",
	    "expected a power of two from cache.page_size (64K) to 32M, got \"32K\"");
}

static void
test_error_max_io_above_32m(void **state)
{
	expect_error(*state, "max-io-large.conf",
	    "writeback = { max_io_bytes = \"64M\"; };\n" EXPORTS_OK,
	    1, "writeback.max_io_bytes",
	    "expected a power of two from cache.page_size (4K) to 32M, got \"64M\"");
}

static void
test_error_max_io_bytes_not_a_power_of_two(void **state)
{
	struct fixture *f = *state;

	expect_error(f, "io3.conf",
	    "writeback = { max_io_bytes = \"768K\"; };\n" EXPORTS_OK,
	    1, "writeback.max_io_bytes", "power of two");
}

static void
test_error_negative_io_threads(void **state)
{
	expect_error(*state, "io-threads.conf",
	    "io_threads = -1;\n" EXPORTS_OK,
	    1, "io_threads", "expected an integer from 0 to 1024, got -1");
}

static void
test_error_bad_tcp_listener(void **state)
{
	expect_error(*state, "tcp-port.conf",
	    "listen = {\n"
	    "  tcp = [ \"127.0.0.1:10809\",\n"
	    "          \"127.0.0.1:70000\" ];\n"
	    "};\n" EXPORTS_OK,
	    3, "listen.tcp[1]", "expected \"host:port\" or \"[v6addr]:port\" "
	    "with a port from 1 to 65535, got \"127.0.0.1:70000\"");
}

static void
test_error_ipv6_listener_without_brackets(void **state)
{
	expect_error(*state, "tcp-v6.conf",
	    "listen = { tcp = [ \"::1:10809\" ]; };\n" EXPORTS_OK,
	    1, "listen.tcp[0]", "got \"::1:10809\"");
}

static void
test_error_listener_not_a_list(void **state)
{
	expect_error(*state, "tcp-string.conf",
	    "listen = { tcp = \"127.0.0.1:10809\"; };\n" EXPORTS_OK,
	    1, "listen.tcp", "expected a list of strings such as "
	    "[ \"127.0.0.1:10809\" ], got \"127.0.0.1:10809\"");
}

static void
test_error_listener_given_twice(void **state)
{
	expect_error(*state, "tcp-dup.conf",
	    "listen = {\n"
	    "  unix = [ \"/run/a.sock\",\n"
	    "           \"/run/a.sock\" ];\n"
	    "};\n" EXPORTS_OK,
	    3, "listen.unix[1]", "got \"/run/a.sock\" again (first at "
	    "listen.unix[0])");
}

static void
test_error_unix_path_too_long(void **state)
{
	struct fixture *f = *state;
	char text[512];
	int n;

	n = snprintf(text, sizeof text, "listen = { unix = [ \"/");
	memset(text + n, 'p', 107);
	snprintf(text + n + 107, sizeof text - n - 107, "\" ]; };\n%s",
	    EXPORTS_OK);
	expect_error(f, "unix-long.conf", text, 1, "listen.unix[0]",
	    "expected a socket path of 1 to 107 bytes, got 108 bytes");
}

static void
test_error_listen_group_without_listeners(void **state)
{
	expect_error(*state, "listen-empty.conf",
	    EXPORTS_OK
	    "listen = {\n"
	    "  tcp = [ ];\n"
	    "};\n",
	    2, "listen", "at least one listener expected");
}

/* ---- Security: allow lists, user and group, socket permissions. ---- */

static void
test_allow_user_group_and_socket_permissions(void **state)
{
	struct fixture *f = *state;
	struct wbd_config *c = &f->cfg;

	load_ok(f,
	    write_conf(f, "security.conf",
		"listen = { unix = [ \"/run/wbd/nbd.sock\" ];\n"
		"           unix_mode = \"0600\"; unix_group = \"root\"; };\n"
		"user = \"root\"; group = \"root\";\n"
		"exports = (\n"
		"  { name = \"a\"; backing = \"/a\";\n"
		"    allow = [ \"127.0.0.0/8\", \"::1\", \"uid:1000\", "
		"\"user:root\",\n"
		"              \"group:root\", \"psk:alice\", \"cn:h1\" ]; },\n"
		"  { name = \"b\"; backing = \"/b\"; allow = [ ]; },\n"
		"  { name = \"c\"; backing = \"/c\"; }\n"
		");\n"));
	assert_int_equal(c->unix_mode, 0600);
	assert_string_equal(c->unix_group, "root");
	assert_int_equal(c->unix_gid, 0);
	assert_string_equal(c->run_as.user, "root");
	assert_string_equal(c->run_as.group, "root");
	assert_int_equal(c->run_as.uid, 0);
	assert_int_equal(c->run_as.gid, 0);
	assert_non_null(c->exports[0].allow);
	assert_int_equal(c->exports[0].allow->n, 7);
	assert_string_equal(c->exports[0].allow->v[6].text, "cn:h1");
	assert_non_null(c->exports[1].allow); /* empty: no one */
	assert_int_equal(c->exports[1].allow->n, 0);
	assert_null(c->exports[2].allow); /* absent: everyone */
	assert_false(config_export_open_to_all(&c->exports[0]));
	assert_false(config_export_open_to_all(&c->exports[1]));
	assert_true(config_export_open_to_all(&c->exports[2]));
}

static void
test_socket_mode_defaults_to_0660_and_no_user(void **state)
{
	struct fixture *f = *state;

	load_ok(f, write_conf(f, "plain.conf", EXPORTS_OK));
	assert_int_equal(f->cfg.unix_mode, 0660);
	assert_null(f->cfg.unix_group);
	assert_null(f->cfg.run_as.user);
}

/* The user's primary group, unless group says otherwise. */
static void
test_user_alone_takes_its_primary_group(void **state)
{
	struct fixture *f = *state;

	load_ok(f, write_conf(f, "user.conf", "user = \"root\";\n" EXPORTS_OK));
	assert_string_equal(f->cfg.run_as.user, "root");
	assert_null(f->cfg.run_as.group);
	assert_int_equal(f->cfg.run_as.gid, 0);
}

static void
test_exposed_listeners(void **state)
{
	struct fixture *f = *state;
	const char *out[4];

	load_ok(f,
	    write_conf(f, "exposed.conf",
		"listen = { tcp = [ \"127.0.0.1:1\", \"0.0.0.0:2\", \"[::1]:3\",\n"
		"                   \"[::]:4\", \"localhost:5\", \"127.9.9.9:6\" ]; "
		"};\n"
		"exports = ( { name = \"a\"; backing = \"/a\"; "
		"allow = [ \"::1\" ]; },\n"
		"            { name = \"b\"; backing = \"/b\"; } );\n"));
	assert_int_equal(config_exposed_listeners(&f->cfg, false, out, 4), 2);
	assert_string_equal(out[0], "0.0.0.0:2");
	assert_string_equal(out[1], "[::]:4");
	assert_int_equal(config_exposed_listeners(&f->cfg, false, out, 1), 2);
	/* TLS in front of them, or an allow list on every export: none. */
	assert_int_equal(config_exposed_listeners(&f->cfg, true, out, 4), 0);
	config_free(&f->cfg);
	load_ok(f,
	    write_conf(f, "guarded.conf",
		"listen = { tcp = [ \"0.0.0.0:2\" ]; };\n"
		"exports = ( { name = \"a\"; backing = \"/a\"; "
		"allow = [ \"10.0.0.0/8\" ]; } );\n"));
	assert_int_equal(config_exposed_listeners(&f->cfg, false, out, 4), 0);
}

static void
test_error_allow_bad_network(void **state)
{
	expect_error(*state, "allow-net.conf",
	    "exports = (\n"
	    "  { name = \"d\"; backing = \"/d\";\n"
	    "    allow = [ \"127.0.0.1\",\n"
	    "              \"192.168.10.5/24\" ]; }\n"
	    ");\n",
	    4, "exports[0].allow[1]", "such as \"192.168.10.0/24\"");
}

static void
test_error_allow_unknown_user_and_group(void **state)
{
	struct fixture *f = *state;

	expect_error(f, "allow-user.conf",
	    "exports = (\n"
	    "  { name = \"d\"; backing = \"/d\";\n"
	    "    allow = [ \"user:no-such-user-wbd\" ]; }\n"
	    ");\n",
	    3, "exports[0].allow[0]", "expected a known user");
	expect_error(f, "allow-group.conf",
	    "exports = (\n"
	    "  { name = \"d\"; backing = \"/d\";\n"
	    "    allow = [ \"uid:0\", \"group:no-such-group-wbd\" ]; }\n"
	    ");\n",
	    3, "exports[0].allow[1]", "no such group");
}

static void
test_error_allow_not_a_list_of_strings(void **state)
{
	struct fixture *f = *state;

	expect_error(f, "allow-string.conf",
	    "exports = ( { name = \"d\"; backing = \"/d\";\n"
	    "              allow = \"127.0.0.1\"; } );\n",
	    2, "exports[0].allow", "expected a list of strings");
	expect_error(f, "allow-int.conf",
	    "exports = ( { name = \"d\"; backing = \"/d\";\n"
	    "              allow = ( \"uid:0\", 1000 ); } );\n",
	    2, "exports[0].allow[1]", "expected a string");
	expect_error(f, "allow-kind.conf",
	    "exports = ( { name = \"d\"; backing = \"/d\";\n"
	    "              allow = [ \"gid:0\" ]; } );\n",
	    2, "exports[0].allow[0]", "\"user:NAME\", \"group:NAME\"");
}

static void
test_error_run_as(void **state)
{
	struct fixture *f = *state;

	expect_error(f, "user.conf",
	    EXPORTS_OK "user = \"no-such-user-wbd\";\n", 2, "user",
	    "expected a known user, got \"no-such-user-wbd\"");
	expect_error(f, "group.conf",
	    EXPORTS_OK "user = \"root\";\ngroup = \"no-such-group-wbd\";\n", 3,
	    "group", "no such group");
	expect_error(f, "group-alone.conf", EXPORTS_OK "group = \"root\";\n", 2,
	    "group", "expected user = \"...\" with group");
}

static void
test_error_unix_mode_and_group(void **state)
{
	struct fixture *f = *state;

	expect_error(f, "unix-mode.conf",
	    EXPORTS_OK "listen = { unix = [ \"/s\" ];\n"
		       "  unix_mode = \"660\"; };\n",
	    3, "listen.unix_mode", "expected an octal mode such as \"0660\"");
	expect_error(f, "unix-group.conf",
	    EXPORTS_OK "listen = { unix = [ \"/s\" ];\n"
		       "  unix_group = \"no-such-group-wbd\"; };\n",
	    3, "listen.unix_group", "expected a known group");
}

/* ---- Where each setting is written, for what is checked later. ---- */

/*
 * What wbd -n checks after reading the file (a backing's directory, a
 * socket in use: check.c) is reported at the line of the setting at
 * fault, not of its group, in the file that holds it, named as the
 * errors of the file's text name it: the path as given, an @include as
 * written.
 */
static void
test_later_checks_know_where_each_setting_is(void **state)
{
	struct fixture *f = *state;
	struct wbd_config *c = &f->cfg;
	char cwd[512], buf[600];
	int rc;

	write_conf(f, "exports.inc",
	    "exports = (\n"
	    "  { name = \"a\"; backing = \"/a\"; },\n"
	    "  {\n"
	    "    name = \"b\";\n"
	    "    backing = \"/b\";\n"
	    "    size = \"1M\";\n"
	    "  }\n"
	    ");\n");
	write_conf(f, "where.conf",
	    "listen = {\n"
	    "  tcp = [ \"127.0.0.1:10809\",\n"
	    "          \"127.0.0.1:10810\" ];\n"
	    "  unix = [ \"/run/a.sock\" ];\n"
	    "};\n"
	    "control = {\n"
	    "  socket = \"/run/c.sock\";\n"
	    "  group = \"root\";\n"
	    "};\n"
	    "@include \"exports.inc\"\n");
	assert_non_null(getcwd(cwd, sizeof cwd));
	assert_int_equal(chdir(f->dir), 0);
	rc = config_load("where.conf", c, f->err, sizeof f->err);
	assert_int_equal(chdir(cwd), 0);
	if (rc != 0)
		fail_msg("config_load(where.conf) failed: %s", f->err);

	assert_string_equal(config_where_str(c, &c->listen_tcp_at[0], buf,
				sizeof buf),
	    "where.conf:2");
	assert_string_equal(config_where_str(c, &c->listen_tcp_at[1], buf,
				sizeof buf),
	    "where.conf:3");
	assert_string_equal(config_where_str(c, &c->listen_unix_at[0], buf,
				sizeof buf),
	    "where.conf:4");
	assert_string_equal(config_where_str(c, &c->control.socket_at, buf,
				sizeof buf),
	    "where.conf:7");
	assert_string_equal(config_where_str(c, &c->control.group_at, buf,
				sizeof buf),
	    "where.conf:8");
	/* The export opens at line 3; its settings are below it. */
	assert_int_equal(c->exports[1].line, 3);
	assert_string_equal(config_where_str(c, &c->exports[1].backing_at, buf,
				sizeof buf),
	    "exports.inc:5");
	assert_string_equal(config_where_str(c, &c->exports[1].size_at, buf,
				sizeof buf),
	    "exports.inc:6");
	assert_string_equal(config_where_str(c, &c->exports[0].backing_at, buf,
				sizeof buf),
	    "exports.inc:2");
	/* Not written (a default): the file alone. */
	assert_string_equal(config_where_str(c, &c->exports[0].size_at, buf,
				sizeof buf),
	    "where.conf");
	assert_string_equal(config_where_str(c, NULL, buf, sizeof buf),
	    "where.conf");

	config_free(c);
	load_ok(f, write_conf(f, "default-listener.conf", EXPORTS_OK));
	assert_int_equal(c->n_listen_tcp, 1);
	assert_null(c->listen_tcp_at);
	assert_int_equal(c->control.socket_at.line, 0);
}

/* A rule between settings is reported at the setting that breaks it, not
 * at the group that holds them. */
static void
test_error_tls_mode_without_credentials(void **state)
{
	expect_error(*state, "tls-nocreds.conf",
	    "tls = {\n"
	    "  mode = \"on\";\n"
	    "};\n" EXPORTS_OK,
	    2, "tls.mode", "expected certificates = \"/dir\" or psk_file");
}

static void
test_error_device_given_twice(void **state)
{
	expect_error(*state, "dev-twice.conf",
	    "writeback = { devices = (\n"
	    "  { device = \"8:0\"; },\n"
	    "  {\n"
	    "    device = \"8:0\"; }\n"
	    "); };\n" EXPORTS_OK,
	    4, "writeback.devices[1].device",
	    "device 8:0 already configured at line 2");
}

static void
test_error_device_min_ratio_above_its_max_ratio(void **state)
{
	expect_error(*state, "dev-min-max.conf",
	    "writeback = { devices = ( {\n"
	    "  device = \"8:0\";\n"
	    "  max_ratio = 10;\n"
	    "  min_ratio = 20; } ); };\n" EXPORTS_OK,
	    4, "writeback.devices[0].min_ratio",
	    "min_ratio (20) above max_ratio (10)");
}

/* A caller that passes no buffer still gets -1 and errno. */
static void
test_error_without_a_buffer(void **state)
{
	struct fixture *f = *state;

	errno = 0;
	assert_int_equal(config_load(write_conf(f, "nobuf.conf", "x = 1;\n"),
	    &f->cfg, NULL, 0), -1);
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_int_equal(config_load(write_conf(f, "nobuf2.conf", "x = ;\n"),
	    &f->cfg, NULL, 0), -1);
	assert_int_equal(errno, EINVAL);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

static void
test_device_ratios(void **state)
{
	struct fixture *f = *state;
	struct wbd_config *c = &f->cfg;
	unsigned lo, hi;

	load_ok(f, write_conf(f, "devices.conf",
	    "writeback = {\n"
	    "  min_ratio = 5; max_ratio = 80;\n"
	    "  devices = ( { device = \"43:1\"; max_ratio = 25; },\n"
	    "              { device = \"8:0\"; min_ratio = 10; } );\n"
	    "};\n" EXPORTS_OK));
	assert_int_equal(c->writeback.n_devices, 2);
	config_device_ratios(c, "43:1", &lo, &hi);
	assert_int_equal(lo, 5);
	assert_int_equal(hi, 25);
	config_device_ratios(c, "8:0", &lo, &hi);
	assert_int_equal(lo, 10);
	assert_int_equal(hi, 80);
	config_device_ratios(c, "254:0", &lo, &hi);     /* the defaults */
	assert_int_equal(lo, 5);
	assert_int_equal(hi, 80);
}

static void
test_error_device_ratios(void **state)
{
	struct fixture *f = *state;

	expect_error(f, "dev1.conf",
	    "writeback = { devices = ( { device = \"sda\"; } ); };\n"
	    EXPORTS_OK, 1, "writeback.devices[0].device", "MAJ:MIN");
	config_free(&f->cfg);
	expect_error(f, "dev2.conf",
	    "writeback = { devices = ( { device = \"8:0\"; max_ratio = 0; } ); };\n"
	    EXPORTS_OK, 1, "writeback.devices[0].max_ratio", "from 1 to 100");
	config_free(&f->cfg);
	expect_error(f, "dev3.conf",
	    "writeback = { devices = ( { device = \"8:0\"; min_ratio = 60; },\n"
	    "  { device = \"8:16\"; min_ratio = 60; } ); };\n"
	    EXPORTS_OK, 2, NULL, "add up to more than 100");
	config_free(&f->cfg);
	expect_error(f, "dev4.conf",
	    "writeback = { devices = ( { device = \"8:0\"; colour = 1; } ); };\n"
	    EXPORTS_OK, 1, NULL, "colour");
}

/* What cannot start is an error; what is unwise, a warning with its line
 * (the file still loads). */
static void
test_error_export_beyond_the_largest_offset(void **state)
{
	expect_error(*state, "8e.conf",
	    "exports = (\n"
	    "  { name = \"d\"; backing = \"/d\"; size = \"8E\"; }\n"
	    ");\n",
	    2, "exports[0].size", "below 8E");
}

/* The largest file offset itself is a size an export may have (tmpfs
 * holds it); that a file system may hold less is wbd -n's check of the
 * host (check.c). */
static void
test_export_up_to_the_largest_offset(void **state)
{
	struct fixture *f = *state;

	load_ok(f,
	    write_conf(f, "8e-1.conf",
		"exports = (\n"
		"  { name = \"d\"; backing = \"/d\";\n"
		"    size = 9223372036854775807L; }\n"
		");\n"));
	assert_true(f->cfg.exports[0].size_bytes == INT64_MAX);
}

static void
test_a_cache_of_most_of_memory_is_a_warning(void **state)
{
	struct fixture *f = *state;
	char where[600];

	load_ok(f, write_conf(f, "plain.conf", EXPORTS_OK));
	assert_null(f->cfg.warnings);
	config_free(&f->cfg);
	load_ok(f,
	    write_conf(f, "most.conf",
		"cache = {\n  size = \"90%\"; };\n" EXPORTS_OK));
	assert_non_null(f->cfg.warnings);
	snprintf(where, sizeof where, "%s:2: cache.size: ", f->path);
	if (strncmp(f->cfg.warnings, where, strlen(where)) != 0 ||
	    strstr(f->cfg.warnings, "75%") == NULL)
		fail_msg("warning \"%s\"", f->cfg.warnings);
	assert_int_equal(strchr(f->cfg.warnings, '\n')[1], '\0');
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_error_export_beyond_the_largest_offset),
		T(test_export_up_to_the_largest_offset),
		T(test_later_checks_know_where_each_setting_is),
		T(test_error_tls_mode_without_credentials),
		T(test_error_device_given_twice),
		T(test_error_device_min_ratio_above_its_max_ratio),
		T(test_a_cache_of_most_of_memory_is_a_warning),
		T(test_error_max_io_bytes_not_a_power_of_two),
		T(test_device_ratios),
		T(test_error_device_ratios),
		T(test_shipped_conf_loads),
		T(test_minimal_conf_takes_every_default),
		T(test_config_defaults_match_a_minimal_file),
		T(test_sizes_may_be_integers_or_strings),
		T(test_cache_size_may_be_a_share_of_ram),
		T(test_thresholds_may_be_given_in_bytes),
		T(test_listeners_of_every_form),
		T(test_listener_groups_carry_an_idle_timeout),
		T(test_listener_group_mistakes),
		T(test_metrics_endpoint_is_off_unless_listen_is_set),
		T(test_unix_only_listener_drops_the_tcp_default),
		T(test_every_cache_mode_and_readonly),
		T(test_direct_is_per_export_and_off_by_default),
		T(test_include_is_relative_to_the_file),
		T(test_cache_mode_names_round_trip),
		T(test_parse_hostport),

		T(test_error_missing_file),
		T(test_error_directory_instead_of_file),
		T(test_error_syntax),
		T(test_error_key_given_twice),
		T(test_error_in_included_file_names_that_file),
		T(test_error_unknown_top_level_key_suggests_the_right_one),
		T(test_error_unknown_key_lists_the_known_ones),
		T(test_error_unknown_key_in_export),
		T(test_error_unknown_key_in_writeback),
		T(test_error_unknown_key_in_cache),
		T(test_error_unknown_key_in_listen),
		T(test_error_bool_where_size_expected),
		T(test_error_string_where_bool_expected),
		T(test_error_direct_not_a_bool),
		T(test_memory_lock),
		T(test_error_direct_with_an_nbd_backing),
		T(test_error_unknown_key_near_direct),
		T(test_error_number_where_string_expected),
		T(test_error_scalar_where_group_expected),
		T(test_error_float_where_integer_expected),
		T(test_error_bad_size_suffix),
		T(test_error_size_too_large),
		T(test_error_negative_size),
		T(test_error_integer_truncated_by_libconfig),
		T(test_error_bad_cache_mode),
		T(test_error_duplicate_export_name),
		T(test_default_export),
		T(test_journal_dir),
		T(test_journal_file_names),
		T(test_journal_state_dir),
		T(test_journal_dir_errors),
		T(test_error_default_export_unknown),
		T(test_max_request_bytes),
		T(test_connection_limits),
		T(test_readahead_bytes),
		T(test_remote_uint_settings),
		T(test_error_missing_name),
		T(test_error_empty_name),
		T(test_error_name_too_long),
		T(test_error_missing_backing),
		T(test_error_no_exports),
		T(test_error_empty_exports),
		T(test_error_exports_not_a_list),
		T(test_error_export_not_a_group),
		T(test_error_page_size_not_power_of_two),
		T(test_error_page_size_too_large),
		T(test_error_cache_smaller_than_a_page),
		T(test_error_cache_share_out_of_range),
		T(test_error_background_ratio_not_below_dirty_ratio),
		T(test_error_dirty_ratio_below_default_background),
		T(test_error_background_bytes_not_below_dirty_bytes),
		T(test_error_background_bytes_not_below_dirty_ratio),
		T(test_error_ratio_and_bytes_both_given),
		T(test_error_ratio_above_100),
		T(test_error_min_workers_above_max_workers),
		T(test_error_min_workers_above_default_max),
		T(test_error_too_many_workers),
		T(test_error_max_io_below_page_size),
		T(test_error_max_io_above_32m),
		T(test_error_negative_io_threads),
		T(test_error_bad_tcp_listener),
		T(test_error_ipv6_listener_without_brackets),
		T(test_error_listener_not_a_list),
		T(test_error_listener_given_twice),
		T(test_error_unix_path_too_long),
		T(test_error_listen_group_without_listeners),
		T(test_error_without_a_buffer),
		T(test_allow_user_group_and_socket_permissions),
		T(test_socket_mode_defaults_to_0660_and_no_user),
		T(test_user_alone_takes_its_primary_group),
		T(test_exposed_listeners),
		T(test_error_allow_bad_network),
		T(test_error_allow_unknown_user_and_group),
		T(test_error_allow_not_a_list_of_strings),
		T(test_error_run_as),
		T(test_error_unix_mode_and_group),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
