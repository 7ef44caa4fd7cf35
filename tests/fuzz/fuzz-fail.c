/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz-fail.c - fuzz_fail(): a target's invariant did not hold.
 */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"

void
fuzz_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "%s:%d: invariant broken: %s\n", file, line, what);
	abort();
}
