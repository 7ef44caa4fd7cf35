/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz-config.c - the configuration loader: the input is written to a
 * file in a private directory made once per process, loaded with
 * config_load() and freed.  A file there, "extra.conf", can be included.
 *
 * Beyond not crashing: a load that fails says why, one that succeeds
 * has at least one export and one listener.
 *
 * Inputs that @include an absolute path or leave the directory are
 * skipped: they would read /dev/zero or a FIFO, which a root-owned
 * configuration may do, not a fuzzer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config-load.h"
#include "fuzz.h"
#include "log.h"

static char fuzz_dir[64];
static char fuzz_path[128];
static char fuzz_extra[128];

static void
fuzz_cleanup(void)
{
	unlink(fuzz_path);
	unlink(fuzz_extra);
	rmdir(fuzz_dir);
}

static int
fuzz_setup(void)
{
	const char *tmp = getenv("TMPDIR");
	FILE *f;

	snprintf(fuzz_dir, sizeof fuzz_dir, "%s/wbd-fuzz-config.XXXXXX",
	    tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp");
	if (!mkdtemp(fuzz_dir))
		return -1;
	snprintf(fuzz_path, sizeof fuzz_path, "%s/wbd.conf", fuzz_dir);
	snprintf(fuzz_extra, sizeof fuzz_extra, "%s/extra.conf", fuzz_dir);
	atexit(fuzz_cleanup);
	if (!(f = fopen(fuzz_extra, "w")))
		return -1;
	fputs(
	    "exports = ( { name = \"inc\"; backing = \"/tmp/inc.img\"; } );\n",
	    f);
	return fclose(f);
}

/* An @include whose name could reach outside the private directory: the
 * string after "include" holds a '/' (or an escape that could make one). */
static int
fuzz_escapes(const uint8_t *data, size_t size)
{
	static const char inc[] = "include";
	const size_t n = sizeof inc - 1;

	for (size_t i = 0; i + n <= size; i++) {
		if (memcmp(data + i, inc, n))
			continue;
		size_t j = i + n;
		while (j < size && data[j] != '"')
			j++;
		for (j++; j < size && data[j] != '"'; j++)
			if (data[j] == '/' || data[j] == '\\')
				return 1;
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct wbd_config cfg;
	char err[1024];
	FILE *f;

	if (!ready) {
		if (fuzz_setup() < 0) {
			perror("fuzz-config: setting up the directory");
			abort();
		}
		ready = 1;
		log_set_thread_quiet(true);
	}
	if (fuzz_escapes(data, size))
		return 0;
	f = fopen(fuzz_path, "w");
	FUZZ_CHECK(f != NULL);
	FUZZ_CHECK(fwrite(data, 1, size, f) == size);
	FUZZ_CHECK(fclose(f) == 0);

	if (config_load(fuzz_path, &cfg, err, sizeof err) < 0) {
		FUZZ_CHECK(err[0] != '\0');
		FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL);
		return 0;
	}
	FUZZ_CHECK(cfg.n_exports > 0);
	FUZZ_CHECK(cfg.n_listen_tcp + cfg.n_listen_unix > 0);
	for (size_t i = 0; i < cfg.n_exports; i++)
		FUZZ_CHECK(cfg.exports[i].name && cfg.exports[i].backing);
	config_free(&cfg);
	return 0;
}
