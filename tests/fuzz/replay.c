/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * replay.c - run a fuzz target once on each file named on the command
 * line, or on each file in each directory named: the seed corpus and the
 * inputs that once crashed, replayed as a test by builds without
 * libFuzzer.  A crash or a broken invariant aborts; otherwise exit 0.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int
replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *data = NULL;
	size_t size = 0, cap = 0, n;

	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	do {
		if (size == cap) {
			cap = cap ? 2 * cap : 4096;
			uint8_t *p = realloc(data, cap);
			if (!p) {
				fprintf(stderr, "%s: out of memory\n", path);
				free(data);
				fclose(f);
				return -1;
			}
			data = p;
		}
		n = fread(data + size, 1, cap - size, f);
		size += n;
	} while (n > 0);
	if (ferror(f)) {
		fprintf(stderr, "%s: read error\n", path);
		free(data);
		fclose(f);
		return -1;
	}
	fclose(f);
	/* An exact-size copy, so that ASan sees reads past the input. */
	uint8_t *exact = malloc(size ? size : 1);
	if (!exact) {
		free(data);
		return -1;
	}
	if (size)
		memcpy(exact, data, size);
	free(data);
	LLVMFuzzerTestOneInput(exact, size);
	free(exact);
	return 0;
}

static int
replay_path(const char *path, unsigned *count)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		(*count)++;
		return replay_file(path);
	}
	struct dirent **names;
	int n = scandir(path, &names, NULL, alphasort);
	int rc = 0;
	if (n < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char *sub;
		if (names[i]->d_name[0] != '.' &&
		    asprintf(&sub, "%s/%s", path, names[i]->d_name) >= 0) {
			if (replay_path(sub, count) < 0)
				rc = -1;
			free(sub);
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

int
main(int argc, char **argv)
{
	unsigned count = 0;
	int rc = 0;

	for (int i = 1; i < argc; i++)
		if (replay_path(argv[i], &count) < 0)
			rc = 1;
	printf("replayed %u input(s)\n", count);
	return rc;
}
