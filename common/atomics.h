/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * atomics.h - the one way wbd touches memory that threads share without
 * a lock: C11 atomics, named by their memory order.  No state of its own.
 * It lives in common/, below every component, so that the cache (which
 * stands on common alone) and common's own lock-free helpers (pubtab.h,
 * ratelimit.h) use it as the daemon does.
 *
 * Every field that some thread reads or writes while another may write it
 * without a common lock is declared _Atomic (`_Atomic uint64_t errors;`,
 * `_Atomic(const char *) name;`).  The compiler then makes every access to
 * it atomic, and clang refuses a generic atomic operation on a field that
 * is not _Atomic; a plain `x->errors++` would be a sequentially consistent
 * (and slower) one, so the daemon writes none: each access says its order,
 * either with the short forms below or with <stdatomic.h>'s explicit
 * functions (atomic_exchange_explicit, atomic_compare_exchange_*_explicit,
 * atomic_fetch_add_explicit where the value is used, ...).  Raw GCC
 * __atomic and __sync builtins, which take a plain field as readily, are
 * not used at all (tests/tree/check-atomics.py).
 *
 * Why macros, not typed inline functions: the generic functions they
 * expand to are already typed by the _Atomic field (a uint64_t counter,
 * an unsigned ratio, a bool flag, a pointer; clang refuses a field that is
 * not _Atomic), so a macro keeps that type without one helper per type;
 * and the explicit forms, repeated some 500 times, made lines hard to
 * read.  Each evaluates its arguments once.
 *
 * The orders, and when to use them:
 *  - relaxed: counters and statistics, settings read one at a time, a
 *    hint (a stop flag polled in a loop).  Nothing else is ordered by it.
 *  - acquire / release: a flag or count that publishes other memory: the
 *    writer's release store (or RMW) makes everything it wrote before
 *    visible to a reader whose acquire load sees the value.
 *  - acq_rel, seq_cst: spelled out with <stdatomic.h>'s explicit forms
 *    at the few places that need them (the last drop of a reference
 *    count, taking a queued flag, the grace periods' epoch and fences).
 *
 * Initialise an _Atomic field before other threads see it with a relaxed
 * store, atomic_init, an initializer, or calloc/memset of the whole struct.
 */
#ifndef WBD_ATOMICS_H
#define WBD_ATOMICS_H

#include <stdatomic.h>
#include <stdint.h>

/* Relaxed: the value, with no order against other memory. */
#define load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#define store_relaxed(p, v)                                                    \
	atomic_store_explicit((p), (v), memory_order_relaxed)

/* A relaxed counter: add or subtract N (the result is not returned; use
 * atomic_fetch_add_explicit where the old value is needed). */
#define add_relaxed(p, n)                                                      \
	((void)atomic_fetch_add_explicit((p), (n), memory_order_relaxed))
#define sub_relaxed(p, n)                                                      \
	((void)atomic_fetch_sub_explicit((p), (n), memory_order_relaxed))

/* Acquire / release: a flag or count that publishes what was written
 * before its release store to whoever loads it with acquire. */
#define load_acquire(p) atomic_load_explicit((p), memory_order_acquire)
#define store_release(p, v)                                                    \
	atomic_store_explicit((p), (v), memory_order_release)

/* Add N to *P with ORDER and return the new value (C11's fetch-and-add
 * returns the old one): the next sequence number or id.  Typed, so the
 * sum is in the field's own type. */
static inline uint64_t
add_fetch_u64(_Atomic uint64_t *p, uint64_t n, memory_order order)
{
	return atomic_fetch_add_explicit(p, n, order) + n;
}

static inline uint32_t
add_fetch_u32(_Atomic uint32_t *p, uint32_t n, memory_order order)
{
	return atomic_fetch_add_explicit(p, n, order) + n;
}

#endif
