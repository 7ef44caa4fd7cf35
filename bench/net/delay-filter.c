/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * delay-filter.c - an nbdkit filter that puts a network round trip on
 * every request, FLUSH included, for bench/net/run.sh.
 *
 *   gcc -O2 -shared -fPIC $(pkg-config --cflags nbdkit) \
 *       -o netdelay.so delay-filter.c
 *   nbdkit --threads 64 --filter=./netdelay.so --filter=rate \
 *       memory 2G rtt=5ms rate=1G
 *
 * nbdkit 1.32's own delay filter delays reads, writes, zeroes, trims and
 * extents, but not FLUSH, and a write-back cache is judged by its FLUSHes.
 * This one delays pread, pwrite, flush, trim, zero, extents and cache:
 * half the round trip before the request reaches the layer below (the
 * request crossing the link), half after it returns (the reply crossing
 * back).  The handshake is not delayed.
 *
 * Threads: every request sleeps on the nbdkit thread that serves it, so
 * requests are not serialised; the filter keeps the plugin's thread model
 * (parallel for memory and file).  nbdkit serves at most --threads requests
 * of one connection at once (16 by default): give it at least the queue
 * depth of the client.  The filter has no state besides its setting, which
 * is written once at configuration time and only read afterwards.
 *
 * Deadlines are absolute CLOCK_MONOTONIC times (clock_nanosleep with
 * TIMER_ABSTIME): the reply leaves at arrival + rtt + the time the layer
 * below took, however late the first sleep woke, so an oversleep is not
 * added twice.
 *
 * Parameter: rtt=TIME, the round trip: a number with the unit s, ms, us or
 * ns ("0.5ms", "5ms"; a bare number is seconds, as nbdkit's delay filter
 * reads it).  rtt=0 (the default) passes requests straight through.
 */
#define _POSIX_C_SOURCE 200809L /* clock_nanosleep with -std=c17 */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nbdkit-filter.h>

#define NS_PER_S INT64_C(1000000000)

static int64_t rtt_ns; /* the whole round trip; set by delay_config */

/* delay_parse_time: "0.5ms" -> 500000 ns; -1 if STR is not a time. */
static int64_t
delay_parse_time(const char *str)
{
	static const struct {
		const char *suffix;
		double ns;
	} units[] = {
		{ "", 1e9 },
		{ "s", 1e9 },
		{ "ms", 1e6 },
		{ "us", 1e3 },
		{ "ns", 1 },
	};
	char *end;
	double v;
	size_t i;

	errno = 0;
	v = strtod(str, &end);
	if (errno != 0 || end == str || v < 0 || v > 3600)
		return -1;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(end, units[i].suffix) == 0)
			return (int64_t)(v * units[i].ns + 0.5);
	return -1;
}

static int
delay_config(nbdkit_next_config *next, nbdkit_backend *nxdata, const char *key,
    const char *value)
{
	if (strcmp(key, "rtt") == 0) {
		rtt_ns = delay_parse_time(value);
		if (rtt_ns < 0) {
			nbdkit_error("netdelay: rtt=%s: expected a time such "
				     "as 0.5ms, 5ms or 0.01s",
			    value);
			return -1;
		}
		return 0;
	}
	return next(nxdata, key, value);
}

#define delay_config_help                                                      \
	"rtt=<TIME>          Round trip added to every request (0.5ms, 5ms)."

static int64_t
delay_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/* delay_until: sleep until the monotonic time DEADLINE_NS (ns). */
static void
delay_until(int64_t deadline_ns)
{
	struct timespec ts = {
		.tv_sec = deadline_ns / NS_PER_S,
		.tv_nsec = deadline_ns % NS_PER_S,
	};

	while (
	    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/*
 * One request's trip: delay_out before the layer below is called, with
 * what it returns; delay_back after.  The request reaches the layer below
 * half a round trip after it arrived, and its reply leaves half a round
 * trip after the layer below returned, measured from that first deadline.
 */
struct delay_trip {
	int64_t sent_ns;   /* when the request reaches the layer below */
	int64_t called_ns; /* when the call to it actually started */
};

static struct delay_trip
delay_out(void)
{
	struct delay_trip t = { 0, 0 };

	if (rtt_ns == 0)
		return t;
	t.sent_ns = delay_now_ns() + rtt_ns / 2;
	delay_until(t.sent_ns);
	t.called_ns = delay_now_ns();
	return t;
}

static void
delay_back(const struct delay_trip *t)
{
	if (rtt_ns == 0)
		return;
	/* The time the layer below took, then the other half. */
	delay_until(t->sent_ns + (delay_now_ns() - t->called_ns) +
	    (rtt_ns - rtt_ns / 2));
}

static int
delay_pread(nbdkit_next *next, void *handle __attribute__((unused)), void *buf,
    uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
	struct delay_trip t = delay_out();
	int r = next->pread(next, buf, count, offset, flags, err);

	delay_back(&t);
	return r;
}

static int
delay_pwrite(nbdkit_next *next, void *handle __attribute__((unused)),
    const void *buf, uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
	struct delay_trip t = delay_out();
	int r = next->pwrite(next, buf, count, offset, flags, err);

	delay_back(&t);
	return r;
}

static int
delay_flush(nbdkit_next *next, void *handle __attribute__((unused)),
    uint32_t flags, int *err)
{
	struct delay_trip t = delay_out();
	int r = next->flush(next, flags, err);

	delay_back(&t);
	return r;
}

static int
delay_trim(nbdkit_next *next, void *handle __attribute__((unused)),
    uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
	struct delay_trip t = delay_out();
	int r = next->trim(next, count, offset, flags, err);

	delay_back(&t);
	return r;
}

static int
delay_zero(nbdkit_next *next, void *handle __attribute__((unused)),
    uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
	struct delay_trip t = delay_out();
	int r = next->zero(next, count, offset, flags, err);

	delay_back(&t);
	return r;
}

static int
delay_extents(nbdkit_next *next, void *handle __attribute__((unused)),
    uint32_t count, uint64_t offset, uint32_t flags,
    struct nbdkit_extents *extents, int *err)
{
	struct delay_trip t = delay_out();
	int r = next->extents(next, count, offset, flags, extents, err);

	delay_back(&t);
	return r;
}

static int
delay_cache(nbdkit_next *next, void *handle __attribute__((unused)),
    uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
	struct delay_trip t = delay_out();
	int r = next->cache(next, count, offset, flags, err);

	delay_back(&t);
	return r;
}

static struct nbdkit_filter filter = {
	.name = "netdelay",
	.longname = "wbd bench: a round trip on every request",
	.config = delay_config,
	.config_help = delay_config_help,
	.pread = delay_pread,
	.pwrite = delay_pwrite,
	.flush = delay_flush,
	.trim = delay_trim,
	.zero = delay_zero,
	.extents = delay_extents,
	.cache = delay_cache,
};

NBDKIT_REGISTER_FILTER(filter)
