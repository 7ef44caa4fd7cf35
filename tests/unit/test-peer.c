/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-peer.c - the key a TCP client's connections are counted under
 * (peer_client_key): IPv4 whole, IPv4-mapped IPv6 as the IPv4 address it
 * carries, IPv6 cut to limits.client_ipv6_prefix bits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <string.h>

#include "peer.h"

static const char *
key_of(const char *addr, unsigned prefix, char *buf)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof ss);
	if (strchr(addr, ':')) {
		struct sockaddr_in6 *sin6 = (void *)&ss;
		sin6->sin6_family = AF_INET6;
		assert_int_equal(inet_pton(AF_INET6, addr, &sin6->sin6_addr),
		    1);
	} else {
		struct sockaddr_in *sin = (void *)&ss;
		sin->sin_family = AF_INET;
		assert_int_equal(inet_pton(AF_INET, addr, &sin->sin_addr), 1);
	}
	return peer_client_key(&ss, prefix, buf, PEER_CLIENT_KEY_BYTES);
}

static void
test_ipv4_counts_whole(void **state)
{
	char buf[PEER_CLIENT_KEY_BYTES];

	assert_string_equal(key_of("10.1.2.3", 64, buf), "10.1.2.3");
	assert_string_equal(key_of("10.1.2.4", 8, buf), "10.1.2.4");
	/* Through a dual-stack socket: the same client as over IPv4, not
	 * one of ::ffff:0:0/96 (every IPv4 client). */
	assert_string_equal(key_of("::ffff:10.1.2.3", 64, buf), "10.1.2.3");
}

static void
test_ipv6_is_cut_to_the_prefix(void **state)
{
	char a[PEER_CLIENT_KEY_BYTES], b[PEER_CLIENT_KEY_BYTES];

	/* Two addresses of one /64: one client. */
	assert_string_equal(key_of("2001:db8:1:2:aaaa:bbbb:cccc:dddd", 64, a),
	    "2001:db8:1:2::/64");
	assert_string_equal(key_of("2001:db8:1:2::1", 64, b),
	    "2001:db8:1:2::/64");
	/* Another /64: another client. */
	assert_string_equal(key_of("2001:db8:1:3::1", 64, a),
	    "2001:db8:1:3::/64");
	/* Bits not on a byte boundary. */
	assert_string_equal(key_of("2001:db8:1:ffff::1", 56, a),
	    "2001:db8:1:ff00::/56");
	assert_string_equal(key_of("2001:db8:ffff::", 36, a),
	    "2001:db8:f000::/36");
	/* 128: the whole address, as for IPv4. */
	assert_string_equal(key_of("2001:db8::7", 128, a), "2001:db8::7");
	assert_string_equal(key_of("::1", 64, a), "::/64");
	assert_true(strlen(key_of("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
			127, a)) < PEER_CLIENT_KEY_BYTES);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ipv4_counts_whole),
		cmocka_unit_test(test_ipv6_is_cut_to_the_prefix),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
