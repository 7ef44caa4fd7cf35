/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz.h - what every fuzz target defines: libFuzzer's entry point.  The
 * same target is linked either with libFuzzer (-fsanitize=fuzzer, the
 * fuzz build) or with replay.c, which runs it once on each file it is
 * given (a regression test in every build).
 */
#ifndef WBD_FUZZ_H
#define WBD_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant: report it and abort, so that libFuzzer keeps the
 * input as a crash and the replay test fails. */
#define FUZZ_CHECK(cond)                                                       \
	do {                                                                   \
		if (!(cond))                                                   \
			fuzz_fail(__FILE__, __LINE__, #cond);                  \
	} while (0)

void fuzz_fail(const char *file, int line, const char *what)
    __attribute__((noreturn));

#endif
