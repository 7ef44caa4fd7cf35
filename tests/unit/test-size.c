/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-size.c - size_parse(), size_format() and size_human(): the sizes
 * users write in wbd.conf and read in wbd's messages.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "size.h"

#define KiB     (UINT64_C(1) << 10)
#define MiB     (UINT64_C(1) << 20)
#define GiB     (UINT64_C(1) << 30)
#define TiB     (UINT64_C(1) << 40)
#define PiB     (UINT64_C(1) << 50)
#define EiB     (UINT64_C(1) << 60)

static void
assert_size(const char *s, uint64_t want)
{
	uint64_t got = 12345;

	if (size_parse(s, &got) != 0)
		fail_msg("size_parse(\"%s\") failed: %s", s, strerror(errno));
	if (got != want)
		fail_msg("size_parse(\"%s\") = %llu, expected %llu", s,
		    (unsigned long long)got, (unsigned long long)want);
}

static void
assert_size_error(const char *s, int want_errno)
{
	uint64_t got = 0;

	errno = 0;
	if (size_parse(s, &got) != -1)
		fail_msg("size_parse(\"%s\") = %llu, expected an error", s,
		    (unsigned long long)got);
	if (errno != want_errno)
		fail_msg("size_parse(\"%s\"): errno %d (%s), expected %d", s,
		    errno, strerror(errno), want_errno);
}

static void
test_plain_numbers_are_bytes(void **state)
{
	assert_size("0", 0);
	assert_size("1", 1);
	assert_size("512", 512);
	assert_size("0004096", 4096);
	assert_size("18446744073709551615", UINT64_MAX);
}

static void
test_every_suffix_is_binary(void **state)
{
	assert_size("1K", KiB);
	assert_size("1M", MiB);
	assert_size("1G", GiB);
	assert_size("1T", TiB);
	assert_size("1P", PiB);
	assert_size("1E", EiB);
	assert_size("10G", 10 * GiB);
	assert_size("512M", 512 * MiB);
	assert_size("15E", 15 * EiB);
}

static void
test_suffixes_are_case_insensitive(void **state)
{
	assert_size("4k", 4 * KiB);
	assert_size("4m", 4 * MiB);
	assert_size("4g", 4 * GiB);
	assert_size("4t", 4 * TiB);
	assert_size("4p", 4 * PiB);
	assert_size("4e", 4 * EiB);
}

static void
test_k_kib_and_kb_are_the_same(void **state)
{
	assert_size("4K", 4096);
	assert_size("4KiB", 4096);
	assert_size("4KB", 4096);
	assert_size("4kib", 4096);
	assert_size("4kb", 4096);
	assert_size("4KIB", 4096);
	assert_size("2MiB", 2 * MiB);
	assert_size("2MB", 2 * MiB);
	assert_size("3GiB", 3 * GiB);
	assert_size("3GB", 3 * GiB);
	assert_size("1TiB", TiB);
	assert_size("1PB", PiB);
	assert_size("1EiB", EiB);
}

static void
test_b_alone_means_bytes(void **state)
{
	assert_size("512B", 512);
	assert_size("512b", 512);
}

static void
test_whitespace_is_allowed_around_the_parts(void **state)
{
	assert_size(" 10G", 10 * GiB);
	assert_size("10G ", 10 * GiB);
	assert_size("10 G", 10 * GiB);
	assert_size("\t10 GiB\n", 10 * GiB);
	assert_size("  4096  ", 4096);
}

static void
test_too_large_is_erange(void **state)
{
	assert_size_error("18446744073709551616", ERANGE);
	assert_size_error("99999999999999999999999", ERANGE);
	assert_size_error("16E", ERANGE);
	assert_size_error("16384P", ERANGE);
	assert_size_error("17179869184G", ERANGE);
	/* Just below the limit still fits. */
	assert_size("17179869183G", 17179869183 * GiB);
	assert_size("16383P", 16383 * PiB);
}

static void
test_garbage_is_einval(void **state)
{
	assert_size_error("", EINVAL);
	assert_size_error("   ", EINVAL);
	assert_size_error("G", EINVAL);
	assert_size_error("10Q", EINVAL);
	assert_size_error("1.5G", EINVAL);
	assert_size_error("-1", EINVAL);
	assert_size_error("+1", EINVAL);
	assert_size_error("0x10", EINVAL);
	assert_size_error("10GG", EINVAL);
	assert_size_error("10GiBB", EINVAL);
	assert_size_error("10BB", EINVAL);
	assert_size_error("10iB", EINVAL);
	assert_size_error("10 G B", EINVAL);
	assert_size_error("10 20", EINVAL);
	assert_size_error("ten", EINVAL);
}

static void
test_format_picks_the_shortest_exact_form(void **state)
{
	char buf[32];

	assert_string_equal(size_format(0, buf, sizeof buf), "0");
	assert_string_equal(size_format(1000, buf, sizeof buf), "1000");
	assert_string_equal(size_format(1536, buf, sizeof buf), "1536");
	assert_string_equal(size_format(KiB, buf, sizeof buf), "1K");
	assert_string_equal(size_format(4 * KiB, buf, sizeof buf), "4K");
	assert_string_equal(size_format(1536 * KiB, buf, sizeof buf), "1536K");
	assert_string_equal(size_format(256 * MiB, buf, sizeof buf), "256M");
	assert_string_equal(size_format(10 * GiB, buf, sizeof buf), "10G");
	assert_string_equal(size_format(2 * TiB, buf, sizeof buf), "2T");
	assert_string_equal(size_format(3 * PiB, buf, sizeof buf), "3P");
	assert_string_equal(size_format(EiB, buf, sizeof buf), "1E");
	assert_string_equal(size_format(UINT64_MAX, buf, sizeof buf),
	    "18446744073709551615");
}

static void
test_format_and_parse_round_trip(void **state)
{
	static const uint64_t values[] = {
		0, 1, 511, 512, 4096, 1536 * KiB, 10 * GiB, 7 * TiB + 5 * GiB,
		15 * EiB, UINT64_MAX,
	};
	uint64_t got;
	char buf[32];
	size_t i;

	for (i = 0; i < sizeof values / sizeof values[0]; i++) {
		assert_int_equal(size_parse(size_format(values[i], buf,
		    sizeof buf), &got), 0);
		assert_true(got == values[i]);
	}
}

static void
test_format_truncates_safely(void **state)
{
	char buf[4];

	size_format(123456, buf, sizeof buf);
	assert_string_equal(buf, "123");
	size_human(10 * GiB, buf, sizeof buf);
	assert_string_equal(buf, "10.");
}

static void
test_human_rounds_to_one_decimal(void **state)
{
	char buf[32];

	assert_string_equal(size_human(0, buf, sizeof buf), "0 B");
	assert_string_equal(size_human(1023, buf, sizeof buf), "1023 B");
	assert_string_equal(size_human(KiB, buf, sizeof buf), "1.0 KiB");
	assert_string_equal(size_human(1536, buf, sizeof buf), "1.5 KiB");
	assert_string_equal(size_human(MiB + MiB / 2, buf, sizeof buf),
	    "1.5 MiB");
	assert_string_equal(size_human(10 * GiB, buf, sizeof buf), "10.0 GiB");
	assert_string_equal(size_human(3 * TiB, buf, sizeof buf), "3.0 TiB");
	assert_string_equal(size_human(PiB, buf, sizeof buf), "1.0 PiB");
	assert_string_equal(size_human(UINT64_MAX, buf, sizeof buf),
	    "16.0 EiB");
}

static void
test_human_never_prints_1024_of_a_unit(void **state)
{
	char buf[32];

	assert_string_equal(size_human(MiB - 1, buf, sizeof buf), "1.0 MiB");
	assert_string_equal(size_human(GiB - 1, buf, sizeof buf), "1.0 GiB");
	assert_string_equal(size_human(1023 * KiB, buf, sizeof buf),
	    "1023.0 KiB");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_numbers_are_bytes),
		cmocka_unit_test(test_every_suffix_is_binary),
		cmocka_unit_test(test_suffixes_are_case_insensitive),
		cmocka_unit_test(test_k_kib_and_kb_are_the_same),
		cmocka_unit_test(test_b_alone_means_bytes),
		cmocka_unit_test(test_whitespace_is_allowed_around_the_parts),
		cmocka_unit_test(test_too_large_is_erange),
		cmocka_unit_test(test_garbage_is_einval),
		cmocka_unit_test(test_format_picks_the_shortest_exact_form),
		cmocka_unit_test(test_format_and_parse_round_trip),
		cmocka_unit_test(test_format_truncates_safely),
		cmocka_unit_test(test_human_rounds_to_one_decimal),
		cmocka_unit_test(test_human_never_prints_1024_of_a_unit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
