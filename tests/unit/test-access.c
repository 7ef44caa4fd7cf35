/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-access.c - allow lists: every kind of entry is parsed (or refused
 * with a message that says what was expected), admits the identity it
 * names and no other; TLS entries match only once TLS has set the name;
 * an export's policy is replaced whole; a socket's peer is read right.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "access.h"
#include "peer.h"

/* A list of the N entries in V; fails the test on a bad one. */
static struct access_list *
list_of(const char *const *v, size_t n)
{
	struct access_list *l = access_list_new(n);
	char err[256];

	assert_non_null(l);
	for (size_t i = 0; i < n; i++) {
		if (access_list_add(l, v[i], err, sizeof err) != 0)
			fail_msg("\"%s\": %s", v[i], err);
	}
	return l;
}

#define LIST(...)                                                              \
	list_of((const char *const[]){ __VA_ARGS__ },                          \
	    sizeof((const char *const[]){ __VA_ARGS__ }) / sizeof(char *))

/* The error for entry S (which must be refused). */
static const char *
refused(const char *s)
{
	static char err[256];
	struct access_list *l = access_list_new(1);

	err[0] = '\0';
	if (access_list_add(l, s, err, sizeof err) == 0)
		fail_msg("\"%s\" was accepted", s);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(l->n, 0);
	access_list_unref(l);
	return err;
}

static struct peer_ident
tcp4(const char *a)
{
	struct peer_ident p = { .transport = PEER_TCP, .family = AF_INET };
	assert_int_equal(inet_pton(AF_INET, a, &p.addr4), 1);
	return p;
}

static struct peer_ident
tcp6(const char *a)
{
	struct peer_ident p = { .transport = PEER_TCP, .family = AF_INET6 };
	assert_int_equal(inet_pton(AF_INET6, a, &p.addr6), 1);
	return p;
}

static struct peer_ident
unix_peer(uid_t uid, gid_t gid)
{
	return (struct peer_ident){ .transport = PEER_UNIX,
		.has_cred = true,
		.uid = uid,
		.gid = gid };
}

static bool
admits(struct access_list *l, const struct peer_ident *p)
{
	return access_list_match(l, p) != NULL;
}

static void
test_networks_v4(void **state)
{
	struct access_list *l =
	    LIST("192.168.10.0/24", "127.0.0.2", "10.0.0.0/8");
	struct peer_ident in = tcp4("192.168.10.77"),
			  out = tcp4("192.168.11.1");
	struct peer_ident bare = tcp4("127.0.0.2"), next = tcp4("127.0.0.3");
	struct peer_ident ten = tcp4("10.200.3.4");

	assert_true(admits(l, &in));
	assert_string_equal(access_list_match(l, &in)->text, "192.168.10.0/24");
	assert_false(admits(l, &out));
	assert_true(admits(l, &bare)); /* a bare address is a /32 */
	assert_false(admits(l, &next));
	assert_true(admits(l, &ten));
	access_list_unref(l);

	/* Prefix lengths that do not fall on a byte boundary. */
	l = LIST("172.16.0.0/12");
	struct peer_ident a = tcp4("172.31.255.255"), b = tcp4("172.32.0.0");
	assert_true(admits(l, &a));
	assert_false(admits(l, &b));
	access_list_unref(l);

	/* /0 is everyone on IPv4, no one on IPv6. */
	l = LIST("0.0.0.0/0");
	struct peer_ident v6 = tcp6("::1");
	assert_true(admits(l, &out));
	assert_false(admits(l, &v6));
	access_list_unref(l);
}

static void
test_networks_v6(void **state)
{
	struct access_list *l = LIST("::1", "fd00:1234::/32", "2001:db8::/33");
	struct peer_ident lo = tcp6("::1"), lo2 = tcp6("::2");
	struct peer_ident ula = tcp6("fd00:1234:ffff::1"),
			  ula2 = tcp6("fd00:1235::1");
	struct peer_ident d1 = tcp6("2001:db8:7fff::1"),
			  d2 = tcp6("2001:db8:8000::1");
	struct peer_ident v4 = tcp4("127.0.0.1");

	assert_true(admits(l, &lo));
	assert_false(admits(l, &lo2));
	assert_true(admits(l, &ula));
	assert_false(admits(l, &ula2));
	assert_true(admits(l, &d1));
	assert_false(admits(l, &d2));
	assert_false(admits(l, &v4));
	access_list_unref(l);

	/* An IPv4-mapped network is an IPv4 one: a peer that comes in mapped
	 * is stored as IPv4 (peer.c). */
	l = LIST("::ffff:10.1.0.0/112");
	assert_int_equal(l->v[0].kind, ACCESS_NET4);
	assert_int_equal(l->v[0].prefix_bits, 16);
	struct peer_ident m = tcp4("10.1.2.3"), n = tcp4("10.2.0.0");
	assert_true(admits(l, &m));
	assert_false(admits(l, &n));
	access_list_unref(l);
}

static void
test_bad_networks(void **state)
{
	assert_non_null(
	    strstr(refused("192.168.10.5/24"), "such as \"192.168.10.0/24\""));
	assert_non_null(strstr(refused("fd00::1/8"), "\"fd00::/8\""));
	assert_non_null(strstr(refused("10.0.0.0/33"), "from 0 to 32"));
	assert_non_null(strstr(refused("::/129"), "from 0 to 128"));
	assert_non_null(strstr(refused("10.0.0.0/"), "prefix length"));
	assert_non_null(strstr(refused("10.0.0.0/ 8"), "prefix length"));
	assert_non_null(strstr(refused("10.0.0.0/+8"), "prefix length"));
	assert_non_null(strstr(refused("10.0.0/8"), "expected an address"));
	assert_non_null(
	    strstr(refused("host.example.org"), "\"uid:N\", \"user:NAME\""));
	assert_non_null(strstr(refused(""), "expected an address"));
	assert_non_null(strstr(refused("/8"), "expected an address"));
	assert_non_null(strstr(refused("gid:0"), "got \"gid:0\""));
}

static void
test_credentials(void **state)
{
	struct access_list *l = LIST("uid:1000", "user:root", "group:root");
	struct peer_ident u1000 = unix_peer(1000, 1000);
	struct peer_ident u1001 = unix_peer(1001, 1001);
	struct peer_ident root = unix_peer(0, 5);
	struct peer_ident gid0 = unix_peer(4242, 0);

	assert_int_equal(l->v[1].kind, ACCESS_UID);
	assert_int_equal(l->v[1].id, 0); /* resolved at load */
	assert_int_equal(l->v[2].kind, ACCESS_GID);
	assert_int_equal(l->v[2].id, 0);
	assert_true(admits(l, &u1000));
	assert_false(admits(l, &u1001));
	assert_true(admits(l, &root));
	assert_true(admits(l, &gid0)); /* the effective gid */
	access_list_unref(l);

	/* A supplementary group counts as much as the effective gid. */
	l = LIST("group:root");
	gid_t groups[] = { 44, 0, 6 };
	struct peer_ident supp = unix_peer(1000, 1000);
	supp.groups = groups;
	supp.n_groups = 3;
	assert_true(admits(l, &supp));
	supp.n_groups = 1;
	assert_false(admits(l, &supp));
	access_list_unref(l);

	/* Credentials that could not be read match nothing. */
	l = LIST("uid:0");
	struct peer_ident unknown = { .transport = PEER_UNIX };
	assert_false(admits(l, &unknown));
	access_list_unref(l);
}

static void
test_bad_credentials(void **state)
{
	assert_non_null(strstr(refused("user:no-such-user-wbd"),
	    "expected a known user, got \"user:no-such-user-wbd\""));
	assert_non_null(strstr(refused("group:no-such-group-wbd"),
	    "expected a known group"));
	assert_non_null(strstr(refused("uid:"), "after \"uid:\""));
	assert_non_null(strstr(refused("uid:-1"), "decimal uid"));
	assert_non_null(strstr(refused("uid:4294967295"), "decimal uid"));
	assert_non_null(strstr(refused("uid:12a"), "decimal uid"));
	assert_non_null(strstr(refused("uid:99999999999"), "decimal uid"));
	assert_non_null(strstr(refused("user:"), "after \"user:\""));
}

/* Addresses never match a Unix-socket peer, credentials never a TCP one. */
static void
test_transports_do_not_mix(void **state)
{
	struct access_list *l = LIST("0.0.0.0/0", "::/0");
	struct peer_ident root = unix_peer(0, 0);
	assert_false(admits(l, &root));
	access_list_unref(l);

	l = LIST("uid:0", "group:root");
	struct peer_ident t = tcp4("127.0.0.1");
	assert_false(admits(l, &t));
	access_list_unref(l);

	struct peer_ident nobody = { .transport = PEER_UNKNOWN };
	l = LIST("0.0.0.0/0", "uid:0");
	assert_false(admits(l, &nobody));
	access_list_unref(l);
}

/* psk: and cn: match what the TLS code sets in the identity, on any
 * transport, and nothing before it has. */
static void
test_tls_names(void **state)
{
	struct access_list *l = LIST("psk:alice", "cn:host1.example.org");
	struct peer_ident t = tcp4("192.0.2.1"), u = unix_peer(1000, 1000);

	assert_false(admits(l, &t));
	assert_int_equal(peer_set_tls_name(t.tls_psk, "alice", 5), 0);
	assert_true(admits(l, &t));
	assert_string_equal(access_list_match(l, &t)->text, "psk:alice");
	assert_int_equal(peer_set_tls_name(t.tls_psk, "alicex", 6), 0);
	assert_false(admits(l, &t));
	/* Case matters, and a CN is not a PSK name. */
	assert_int_equal(peer_set_tls_name(u.tls_cn, "HOST1.example.org", 17),
	    0);
	assert_false(admits(l, &u));
	assert_int_equal(peer_set_tls_name(u.tls_cn, "host1.example.org", 17),
	    0);
	assert_true(admits(l, &u));
	assert_int_equal(peer_set_tls_name(u.tls_psk, "host1.example.org", 17),
	    0);
	u.tls_cn[0] = '\0';
	assert_false(admits(l, &u));
	access_list_unref(l);

	/* A name with a NUL, or too long, is stored as none. */
	char big[PEER_TLS_NAME_BYTES + 1];
	memset(big, 'a', sizeof big);
	assert_int_equal(peer_set_tls_name(t.tls_psk, "ali\0ce", 6), -1);
	assert_string_equal(t.tls_psk, "");
	assert_int_equal(peer_set_tls_name(t.tls_cn, big, sizeof big), -1);
	assert_string_equal(t.tls_cn, "");
	assert_int_equal(peer_set_tls_name(t.tls_cn, big,
			     PEER_TLS_NAME_BYTES - 1),
	    0);
	assert_int_equal(strlen(t.tls_cn), PEER_TLS_NAME_BYTES - 1);

	assert_non_null(strstr(refused("psk:"), "after \"psk:\""));
	char entry[3 + PEER_TLS_NAME_BYTES + 1];
	memset(entry, 'a', sizeof entry - 1);
	entry[sizeof entry - 1] = '\0';
	memcpy(entry, "cn:", 3);
	assert_non_null(strstr(refused(entry), "at most 255 bytes"));
	entry[sizeof entry - 2] = '\0'; /* 255 bytes: fits */
	struct access_list *fits = LIST(entry);
	access_list_unref(fits);
}

static void
test_equal(void **state)
{
	struct access_list *a = LIST("uid:0", "10.0.0.0/8");
	struct access_list *b = LIST("uid:0", "10.0.0.0/8");
	struct access_list *c = LIST("10.0.0.0/8", "uid:0");
	struct access_list *empty = access_list_new(0);

	assert_true(access_list_equal(a, b));
	assert_false(access_list_equal(a, c));
	assert_true(access_list_equal(NULL, NULL));
	assert_false(access_list_equal(NULL, empty));
	assert_false(access_list_equal(a, NULL));
	access_list_unref(a);
	access_list_unref(b);
	access_list_unref(c);
	access_list_unref(empty);
}

static void
test_policy(void **state)
{
	struct access_policy ap;
	struct peer_ident lo = tcp4("127.0.0.1"), other = tcp4("127.0.0.2");
	char why[256];

	/* No list: everyone. */
	access_policy_init(&ap, NULL);
	assert_true(access_policy_allows(&ap, &other, why, sizeof why));

	struct access_list *l = LIST("127.0.0.1");
	assert_true(access_policy_set(&ap, l));
	access_list_unref(l); /* the policy keeps its own reference */
	assert_true(access_policy_allows(&ap, &lo, why, sizeof why));
	assert_false(access_policy_allows(&ap, &other, why, sizeof why));
	assert_string_equal(why,
	    "127.0.0.2 matches none of the 1 entries of its allow list");

	/* An equal list changes nothing; another replaces it. */
	l = LIST("127.0.0.1");
	assert_false(access_policy_set(&ap, l));
	access_list_unref(l);
	l = LIST("127.0.0.2");
	assert_true(access_policy_set(&ap, l));
	access_list_unref(l);
	assert_false(access_policy_allows(&ap, &lo, NULL, 0));
	assert_true(access_policy_allows(&ap, &other, NULL, 0));

	/* An empty list: no one. */
	l = access_list_new(0);
	assert_true(access_policy_set(&ap, l));
	access_list_unref(l);
	assert_false(access_policy_allows(&ap, &lo, why, sizeof why));
	assert_string_equal(why, "127.0.0.1 refused: its allow list is empty");
	assert_true(access_policy_set(&ap, NULL));
	assert_true(access_policy_allows(&ap, &lo, NULL, 0));
	access_policy_destroy(&ap);
}

static void
test_describe(void **state)
{
	char buf[256];
	struct peer_ident v4 = tcp4("127.0.0.2"), v6 = tcp6("::1");
	struct peer_ident u = unix_peer(1000, 100);

	assert_string_equal(peer_describe(&v4, buf, sizeof buf), "127.0.0.2");
	assert_string_equal(peer_describe(&v6, buf, sizeof buf), "[::1]");
	assert_string_equal(peer_describe(&u, buf, sizeof buf),
	    "uid 1000 gid 100");
	peer_set_tls_name(v4.tls_psk, "alice", 5);
	peer_set_tls_name(v4.tls_cn, "h1", 2);
	assert_string_equal(peer_describe(&v4, buf, sizeof buf),
	    "127.0.0.2 psk alice cn h1");
	assert_string_equal(peer_describe(&v4, buf, 5), "127.");
}

/* peer_ident_from_fd: a Unix socket's credentials, a TCP peer's address. */
static void
test_from_fd(void **state)
{
	struct peer_ident p;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(peer_ident_from_fd(&p, sv[0]), 0);
	assert_int_equal(p.transport, PEER_UNIX);
	assert_true(p.has_cred);
	assert_int_equal(p.uid, geteuid());
	assert_int_equal(p.gid, getegid());
	int n = getgroups(0, NULL);
	assert_int_equal(p.n_groups, (size_t)n);
	peer_ident_clear(&p);
	assert_null(p.groups);
	close(sv[0]);
	close(sv[1]);

	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof sin;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(l, (struct sockaddr *)&sin, sizeof sin), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sin, &len), 0);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(c, (struct sockaddr *)&sin, sizeof sin), 0);
	int a = accept(l, NULL, NULL);
	assert_true(a >= 0);
	assert_int_equal(peer_ident_from_fd(&p, a), 0);
	assert_int_equal(p.transport, PEER_TCP);
	assert_int_equal(p.family, AF_INET);
	assert_int_equal(ntohl(p.addr4.s_addr), INADDR_LOOPBACK);
	assert_false(p.has_cred);
	peer_ident_clear(&p);
	close(a);
	close(c);
	close(l);

	/* Not a socket: nothing known, and it says so. */
	int pfd[2];
	assert_int_equal(pipe(pfd), 0);
	assert_int_equal(peer_ident_from_fd(&p, pfd[0]), -1);
	assert_int_equal(errno, ENOTSOCK);
	assert_int_equal(p.transport, PEER_UNKNOWN);
	peer_ident_clear(&p);
	close(pfd[0]);
	close(pfd[1]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_networks_v4),
		cmocka_unit_test(test_networks_v6),
		cmocka_unit_test(test_bad_networks),
		cmocka_unit_test(test_credentials),
		cmocka_unit_test(test_bad_credentials),
		cmocka_unit_test(test_transports_do_not_mix),
		cmocka_unit_test(test_tls_names),
		cmocka_unit_test(test_equal),
		cmocka_unit_test(test_policy),
		cmocka_unit_test(test_describe),
		cmocka_unit_test(test_from_fd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
