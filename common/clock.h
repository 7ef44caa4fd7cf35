/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * clock.h - the monotonic clock every thread reads, and container_of.
 * No state: safe from any thread.
 */
#ifndef WBD_CLOCK_H
#define WBD_CLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Nanoseconds on CLOCK_MONOTONIC (ages, deadlines, back-off). */
static inline uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The structure of type TYPE whose MEMBER PTR points at. */
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

#endif
