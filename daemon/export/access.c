/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * access.c - allow lists: parsing entries, matching an identity, and an
 * export's current list (see access.h).
 *
 * Parsing runs where the configuration is loaded (main thread, or the
 * thread that reloads) and may block in name lookups (getpwnam_r); matching
 * runs on I/O threads and neither allocates nor blocks beyond the policy's
 * mutex.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "access.h"
#include "atomics.h"

#define ACCESS_EXPECTED                                                        \
	"an address or network (\"192.168.10.0/24\", \"::1\"), \"uid:N\", "    \
	"\"user:NAME\", \"group:NAME\", \"psk:NAME\" or \"cn:NAME\""

struct access_list *
access_list_new(size_t cap)
{
	struct access_list *l = calloc(1, sizeof *l + cap * sizeof l->v[0]);

	if (l) {
		store_relaxed(&l->refs, 1);
		l->cap = cap;
	}
	return l;
}

struct access_list *
access_list_ref(struct access_list *l)
{
	if (l)
		add_relaxed(&l->refs, 1);
	return l;
}

void
access_list_unref(struct access_list *l)
{
	if (!l ||
	    atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) != 1)
		return;
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].text);
	free(l);
}

/* The bits of byte I of an address that a /PREFIX_BITS network fixes. */
static uint8_t
access_net_mask(size_t i, unsigned prefix_bits)
{
	unsigned keep = prefix_bits >= 8 * (i + 1) ? 8 :
	    prefix_bits > 8 * i ? prefix_bits - 8 * (unsigned)i :
				  0;

	return (uint8_t)(0xff00 >> keep);
}

/* Do A and B (LEN bytes) agree on their first PREFIX_BITS bits? */
static bool
access_prefix_equal(const uint8_t *a, const uint8_t *b, size_t len,
    unsigned prefix_bits)
{
	for (size_t i = 0; i < len; i++)
		if ((a[i] ^ b[i]) & access_net_mask(i, prefix_bits))
			return false;
	return true;
}

/* "A.B.C.D[/N]" or "V6[/N]"; an IPv4-mapped IPv6 network becomes IPv4. */
static int
access_parse_net(const char *s, struct access_entry *e, char *err,
    size_t errlen)
{
	char addr[INET6_ADDRSTRLEN + 1], net[INET6_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	unsigned long bits;

	if (n == 0 || n >= sizeof addr)
		goto bad;
	memcpy(addr, s, n);
	addr[n] = '\0';
	if (inet_pton(AF_INET, addr, e->addr) == 1) {
		e->kind = ACCESS_NET4;
		e->prefix_bits = 32;
	} else if (inet_pton(AF_INET6, addr, e->addr) == 1) {
		e->kind = ACCESS_NET6;
		e->prefix_bits = 128;
	} else {
		goto bad;
	}
	if (slash) {
		const char *num = slash + 1;
		bits = strtoul(num, NULL, 10);
		if (!*num || strlen(num) > 3 ||
		    strspn(num, "0123456789") != strlen(num) ||
		    bits > e->prefix_bits) {
			snprintf(err, errlen,
			    "expected a prefix length from 0 "
			    "to %u after the \"/\", got \"%s\"",
			    e->prefix_bits, s);
			errno = EINVAL;
			return -1;
		}
		e->prefix_bits = (unsigned)bits;
	}
	uint8_t masked[16] = { 0 };
	for (size_t i = 0; i < sizeof masked; i++)
		masked[i] = e->addr[i] & access_net_mask(i, e->prefix_bits);
	if (memcmp(masked, e->addr, sizeof masked) != 0) {
		/* "192.168.10.5/24" is most likely a typo: say what it is. */
		inet_ntop(e->kind == ACCESS_NET4 ? AF_INET : AF_INET6, masked,
		    net, sizeof net);
		snprintf(err, errlen,
		    "expected a network with no bits set past "
		    "its /%u prefix, such as \"%s/%u\", got \"%s\"",
		    e->prefix_bits, net, e->prefix_bits, s);
		errno = EINVAL;
		return -1;
	}
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };
	if (e->kind == ACCESS_NET6 && e->prefix_bits >= 96 &&
	    memcmp(e->addr, v4mapped, sizeof v4mapped) == 0) {
		/* Peers are compared as IPv4 when they come in mapped. */
		memmove(e->addr, e->addr + 12, 4);
		memset(e->addr + 4, 0, 12);
		e->kind = ACCESS_NET4;
		e->prefix_bits -= 96;
	}
	return 0;

bad:
	snprintf(err, errlen, "expected " ACCESS_EXPECTED ", got \"%s\"", s);
	errno = EINVAL;
	return -1;
}

/* "uid:N": a decimal uid, not the invalid (uid_t)-1. */
static int
access_parse_uid(const char *num, struct access_entry *e)
{
	unsigned long long v;

	if (!*num || strspn(num, "0123456789") != strlen(num) ||
	    strlen(num) > 10)
		return -1;
	v = strtoull(num, NULL, 10);
	if (v >= UINT32_MAX)
		return -1;
	e->kind = ACCESS_UID;
	e->id = (uint32_t)v;
	return 0;
}

/* Look NAME up as a user (GROUP false: its uid and primary gid) or a
 * group (its gid in *ID).  0, ENOENT, or why the lookup failed. */
static int
access_lookup(const char *name, bool group, uint32_t *id, uint32_t *gid)
{
	long sz = sysconf(group ? _SC_GETGR_R_SIZE_MAX : _SC_GETPW_R_SIZE_MAX);
	size_t bufsz = sz > 0 ? (size_t)sz : 16384;
	char *buf = NULL;
	int r;

	for (;;) {
		char *nb = realloc(buf, bufsz);
		if (!nb) {
			free(buf);
			return ENOMEM;
		}
		buf = nb;
		if (group) {
			struct group gr, *res;
			r = getgrnam_r(name, &gr, buf, bufsz, &res);
			if (r == 0 && res)
				*id = (uint32_t)res->gr_gid;
			else if (r == 0)
				r = ENOENT;
		} else {
			struct passwd pw, *res;
			r = getpwnam_r(name, &pw, buf, bufsz, &res);
			if (r == 0 && res) {
				*id = (uint32_t)res->pw_uid;
				*gid = (uint32_t)res->pw_gid;
			} else if (r == 0) {
				r = ENOENT;
			}
		}
		if (r != ERANGE || bufsz >= (1u << 20))
			break;
		bufsz *= 2;
	}
	free(buf);
	return r;
}

int
access_user_ids(const char *name, uint32_t *uid, uint32_t *gid)
{
	return access_lookup(name, false, uid, gid);
}

int
access_group_id(const char *name, uint32_t *gid)
{
	return access_lookup(name, true, gid, NULL);
}

/* "user:NAME" or "group:NAME" to its id in E. */
static int
access_parse_name(const char *name, bool group, struct access_entry *e,
    char *err, size_t errlen)
{
	const char *what = group ? "group" : "user";
	uint32_t gid;
	int r = group ? access_group_id(name, &e->id) :
			access_user_ids(name, &e->id, &gid);

	if (r == 0)
		return 0;
	if (r == ENOENT)
		snprintf(err, errlen,
		    "expected a known %s, got \"%s:%s\": no "
		    "such %s",
		    what, what, name, what);
	else
		snprintf(err, errlen, "cannot look up %s \"%s\": %s", what,
		    name, strerror(r));
	errno = r == ENOMEM ? ENOMEM : EINVAL;
	return -1;
}

static int
access_parse(const char *s, struct access_entry *e, char *err, size_t errlen)
{
	static const struct {
		const char *prefix;
		enum access_kind kind;
	} named[] = {
		{ "uid:", ACCESS_UID },
		{ "user:", ACCESS_UID },
		{ "group:", ACCESS_GID },
		{ "psk:", ACCESS_PSK },
		{ "cn:", ACCESS_CN },
	};

	for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
		size_t plen = strlen(named[i].prefix);
		if (strncmp(s, named[i].prefix, plen) != 0)
			continue;
		const char *arg = s + plen;
		if (!*arg) {
			snprintf(err, errlen,
			    "expected a name or number after "
			    "\"%s\", got nothing",
			    named[i].prefix);
			errno = EINVAL;
			return -1;
		}
		e->kind = named[i].kind;
		switch (named[i].kind) {
		case ACCESS_UID:
			if (strcmp(named[i].prefix, "uid:") == 0) {
				if (access_parse_uid(arg, e) == 0)
					return 0;
				snprintf(err, errlen,
				    "expected \"uid:N\" with "
				    "a decimal uid, got \"%s\"",
				    s);
				errno = EINVAL;
				return -1;
			}
			return access_parse_name(arg, false, e, err, errlen);
		case ACCESS_GID:
			return access_parse_name(arg, true, e, err, errlen);
		default:
			if (strlen(arg) >= PEER_TLS_NAME_BYTES) {
				snprintf(err, errlen,
				    "expected a name of at "
				    "most %d bytes after \"%s\"",
				    PEER_TLS_NAME_BYTES - 1, named[i].prefix);
				errno = EINVAL;
				return -1;
			}
			e->name = arg; /* made to point into text below */
			return 0;
		}
	}
	return access_parse_net(s, e, err, errlen);
}

int
access_list_add(struct access_list *l, const char *s, char *err, size_t errlen)
{
	struct access_entry e = { 0 };

	if (l->n >= l->cap) {
		snprintf(err, errlen, "too many entries");
		errno = EINVAL;
		return -1;
	}
	if (access_parse(s, &e, err, errlen) < 0)
		return -1;
	if ((e.text = strdup(s)) == NULL) {
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return -1;
	}
	if (e.name)
		e.name = e.text + (e.name - s);
	l->v[l->n++] = e;
	return 0;
}

static bool
access_entry_equal(const struct access_entry *a, const struct access_entry *b)
{
	return a->kind == b->kind && strcmp(a->text, b->text) == 0 &&
	    a->id == b->id && a->prefix_bits == b->prefix_bits &&
	    memcmp(a->addr, b->addr, sizeof a->addr) == 0;
}

bool
access_list_equal(const struct access_list *a, const struct access_list *b)
{
	if (!a || !b)
		return a == b;
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (!access_entry_equal(&a->v[i], &b->v[i]))
			return false;
	return true;
}

static bool
access_gid_held(const struct peer_ident *p, uint32_t gid)
{
	if (p->gid == gid)
		return true;
	for (size_t i = 0; i < p->n_groups; i++)
		if (p->groups[i] == gid)
			return true;
	return false;
}

static bool
access_entry_matches(const struct access_entry *e, const struct peer_ident *p)
{
	bool tcp = p->transport == PEER_TCP;
	bool cred = p->transport == PEER_UNIX && p->has_cred;

	switch (e->kind) {
	case ACCESS_NET4:
		return tcp && p->family == AF_INET &&
		    access_prefix_equal(e->addr, (const uint8_t *)&p->addr4, 4,
			e->prefix_bits);
	case ACCESS_NET6:
		return tcp && p->family == AF_INET6 &&
		    access_prefix_equal(e->addr, p->addr6.s6_addr, 16,
			e->prefix_bits);
	case ACCESS_UID:
		return cred && p->uid == e->id;
	case ACCESS_GID:
		return cred && access_gid_held(p, e->id);
	case ACCESS_PSK:
		return p->tls_psk[0] && strcmp(p->tls_psk, e->name) == 0;
	case ACCESS_CN:
		return p->tls_cn[0] && strcmp(p->tls_cn, e->name) == 0;
	}
	return false;
}

const struct access_entry *
access_list_match(const struct access_list *l, const struct peer_ident *p)
{
	for (size_t i = 0; l && i < l->n; i++)
		if (access_entry_matches(&l->v[i], p))
			return &l->v[i];
	return NULL;
}

void
access_policy_init(struct access_policy *ap, struct access_list *l)
{
	pthread_mutex_init(&ap->lock, NULL);
	ap->list = access_list_ref(l);
}

void
access_policy_destroy(struct access_policy *ap)
{
	access_list_unref(ap->list);
	ap->list = NULL;
	pthread_mutex_destroy(&ap->lock);
}

struct access_list *
access_policy_get(struct access_policy *ap)
{
	pthread_mutex_lock(&ap->lock);
	struct access_list *l = access_list_ref(ap->list);
	pthread_mutex_unlock(&ap->lock);
	return l;
}

bool
access_policy_set(struct access_policy *ap, struct access_list *l)
{
	struct access_list *old;

	pthread_mutex_lock(&ap->lock);
	old = ap->list;
	bool same = access_list_equal(old, l);
	if (!same)
		ap->list = access_list_ref(l);
	pthread_mutex_unlock(&ap->lock);
	if (!same)
		access_list_unref(old);
	return !same;
}

bool
access_policy_allows(struct access_policy *ap, const struct peer_ident *p,
    char *why, size_t whylen)
{
	char who[PEER_TLS_NAME_BYTES];
	size_t n;
	bool ok;

	pthread_mutex_lock(&ap->lock);
	ok = !ap->list || access_list_match(ap->list, p) != NULL;
	n = ap->list ? ap->list->n : 0;
	pthread_mutex_unlock(&ap->lock);
	if (!ok && why) {
		peer_describe(p, who, sizeof who);
		if (n == 0)
			snprintf(why, whylen,
			    "%s refused: its allow list is "
			    "empty",
			    who);
		else
			snprintf(why, whylen,
			    "%s matches none of the %zu "
			    "entries of its allow list",
			    who, n);
	}
	return ok;
}
