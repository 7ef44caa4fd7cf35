/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tls.c - TLS on the serving side through GnuTLS (tls.h).
 *
 * GnuTLS reads and writes the socket through our transport functions: the
 * bytes read past the STARTTLS option come first, then the socket; every
 * call is non-blocking.  PSK keys are read into memory at load, so a
 * broken file at reload leaves the running keys in place.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "atomics.h"
#include "tls.h"

/* A PSK line longer than this is refused. */
#define TLS_PSK_LINE_MAX 4096

struct tls_psk_key {
	char *name;
	unsigned char *key;
	size_t len;
};

struct tls_creds {
	_Atomic int refs;
	bool verify_peer;
	gnutls_certificate_credentials_t x509; /* or: */
	gnutls_psk_server_credentials_t psk;
	struct tls_psk_key *keys;
	size_t nkeys;
	gnutls_priority_t prio;
};

struct tls_session {
	gnutls_session_t g;
	struct tls_creds *cr;
	int fd;
	unsigned char *pre; /* read before TLS began */
	size_t prelen, preoff;
};

const char *
tls_mode_name(enum tls_mode m)
{
	switch (m) {
	case TLS_OFF:
		return "off";
	case TLS_ON:
		return "on";
	case TLS_REQUIRE:
		return "require";
	}
	return "?";
}

/* --- credentials ------------------------------------------------------- */

static void
tls_creds_free(struct tls_creds *cr)
{
	if (cr->x509)
		gnutls_certificate_free_credentials(cr->x509);
	if (cr->psk)
		gnutls_psk_free_server_credentials(cr->psk);
	for (size_t i = 0; i < cr->nkeys; i++) {
		free(cr->keys[i].name);
		if (cr->keys[i].key)
			explicit_bzero(cr->keys[i].key, cr->keys[i].len);
		free(cr->keys[i].key);
	}
	free(cr->keys);
	if (cr->prio)
		gnutls_priority_deinit(cr->prio);
	free(cr);
}

void
tls_creds_unref(struct tls_creds *cr)
{
	if (cr &&
	    atomic_fetch_sub_explicit(&cr->refs, 1, memory_order_acq_rel) == 1)
		tls_creds_free(cr);
}

static struct tls_creds *
tls_creds_ref(struct tls_creds *cr)
{
	if (cr)
		add_relaxed(&cr->refs, 1);
	return cr;
}

static int
tls_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* One "username:hexkey" line into K; a message in ERR if it is not one. */
static int
tls_psk_parse(char *line, struct tls_psk_key *k, char *err, size_t errlen)
{
	char *colon = strchr(line, ':');

	if (!colon || colon == line) {
		snprintf(err, errlen, "expected \"username:hexkey\"");
		return -1;
	}
	*colon = '\0';
	const char *hex = colon + 1;
	size_t hexlen = strlen(hex);
	if (colon - line >= TLS_MAX_IDENT) {
		snprintf(err, errlen, "username longer than %d bytes",
		    TLS_MAX_IDENT - 1);
		return -1;
	}
	if (hexlen == 0 || hexlen % 2) {
		snprintf(err, errlen,
		    "the key of \"%s\" is not an even number "
		    "of hex digits",
		    line);
		return -1;
	}
	k->len = hexlen / 2;
	k->key = malloc(k->len);
	k->name = strdup(line);
	if (!k->key || !k->name) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < k->len; i++) {
		int hi = tls_hexval(hex[2 * i]),
		    lo = tls_hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			snprintf(err, errlen, "the key of \"%s\" is not hex",
			    line);
			return -1;
		}
		k->key[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

static int
tls_psk_load(struct tls_creds *cr, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char line[TLS_PSK_LINE_MAX + 2], why[160];
	unsigned lineno = 0;

	if (!f) {
		snprintf(err, errlen, "tls.psk_file %s: %s", path,
		    strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		size_t n = strlen(line);
		lineno++;
		if (n > TLS_PSK_LINE_MAX) {
			snprintf(err, errlen, "%s:%u: line too long", path,
			    lineno);
			goto fail;
		}
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (n == 0 || line[0] == '#')
			continue;
		struct tls_psk_key *v =
		    realloc(cr->keys, (cr->nkeys + 1) * sizeof *v);
		if (!v) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		cr->keys = v;
		memset(&v[cr->nkeys], 0, sizeof *v);
		cr->nkeys++;
		if (tls_psk_parse(line, &v[cr->nkeys - 1], why, sizeof why)) {
			snprintf(err, errlen, "%s:%u: %s", path, lineno, why);
			goto fail;
		}
	}
	explicit_bzero(line, sizeof line);
	fclose(f);
	if (cr->nkeys == 0) {
		snprintf(err, errlen, "tls.psk_file %s holds no key", path);
		return -1;
	}
	return 0;
fail:
	explicit_bzero(line, sizeof line);
	fclose(f);
	return -1;
}

/* GnuTLS asks for USERNAME's key during a PSK handshake. */
static int
tls_psk_lookup(gnutls_session_t g, const char *username, gnutls_datum_t *key)
{
	struct tls_session *s = gnutls_session_get_ptr(g);

	for (size_t i = 0; i < s->cr->nkeys; i++) {
		const struct tls_psk_key *k = &s->cr->keys[i];
		if (strcmp(k->name, username) != 0)
			continue;
		key->data = gnutls_malloc(k->len);
		if (!key->data)
			return -1;
		memcpy(key->data, k->key, k->len);
		key->size = (unsigned)k->len;
		return 0;
	}
	return -1;
}

static int
tls_x509_load(struct tls_creds *cr, const char *dir, bool verify_peer,
    char *err, size_t errlen)
{
	char ca[PATH_MAX], crl[PATH_MAX], cert[PATH_MAX], key[PATH_MAX];
	int r;

	snprintf(ca, sizeof ca, "%s/ca-cert.pem", dir);
	snprintf(crl, sizeof crl, "%s/ca-crl.pem", dir);
	snprintf(cert, sizeof cert, "%s/server-cert.pem", dir);
	snprintf(key, sizeof key, "%s/server-key.pem", dir);
	if ((r = gnutls_certificate_allocate_credentials(&cr->x509)) < 0)
		goto gnutls_fail;
	if (access(ca, F_OK) == 0 || verify_peer) {
		r = gnutls_certificate_set_x509_trust_file(cr->x509, ca,
		    GNUTLS_X509_FMT_PEM);
		if (r <= 0) {
			snprintf(err, errlen, "%s: %s", ca,
			    r < 0 ? gnutls_strerror(r) :
				    "no certificate in it");
			return -1;
		}
	}
	if (access(crl, F_OK) == 0) {
		r = gnutls_certificate_set_x509_crl_file(cr->x509, crl,
		    GNUTLS_X509_FMT_PEM);
		if (r < 0) {
			snprintf(err, errlen, "%s: %s", crl,
			    gnutls_strerror(r));
			return -1;
		}
	}
	r = gnutls_certificate_set_x509_key_file(cr->x509, cert, key,
	    GNUTLS_X509_FMT_PEM);
	if (r < 0) {
		snprintf(err, errlen, "%s and %s: %s", cert, key,
		    r == GNUTLS_E_FILE_ERROR ? "cannot be read" :
					       gnutls_strerror(r));
		return -1;
	}
	gnutls_certificate_set_known_dh_params(cr->x509,
	    GNUTLS_SEC_PARAM_MEDIUM);
	return 0;
gnutls_fail:
	snprintf(err, errlen, "%s", gnutls_strerror(r));
	return -1;
}

struct tls_creds *
tls_creds_load(const struct tls_conf *tc, char *err, size_t errlen)
{
	struct tls_creds *cr = calloc(1, sizeof *cr);
	const char *prio = tc->priority ? tc->priority : "NORMAL";
	/* tls.priority (at most 1024 bytes) and the PSK suffix: never cut. */
	char prio_psk[1024 + sizeof ":+ECDHE-PSK:+DHE-PSK:+PSK"];
	const char *errpos = NULL;
	int r;

	if (!cr) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	store_relaxed(&cr->refs, 1);
	cr->verify_peer = tc->verify_peer;
	if (tc->psk_file) {
		if (tls_psk_load(cr, tc->psk_file, err, errlen) < 0)
			goto fail;
		if ((r = gnutls_psk_allocate_server_credentials(&cr->psk)) <
		    0) {
			snprintf(err, errlen, "%s", gnutls_strerror(r));
			goto fail;
		}
		gnutls_psk_set_server_credentials_function(cr->psk,
		    tls_psk_lookup);
		/* PSK key exchanges are not in GnuTLS's NORMAL. */
		snprintf(prio_psk, sizeof prio_psk,
		    "%s:+ECDHE-PSK:+DHE-PSK:+PSK", prio);
		prio = prio_psk;
	} else if (tc->certificates) {
		if (tls_x509_load(cr, tc->certificates, tc->verify_peer, err,
			errlen) < 0)
			goto fail;
	} else {
		snprintf(err, errlen,
		    "neither tls.certificates nor "
		    "tls.psk_file is set");
		goto fail;
	}
	if ((r = gnutls_priority_init(&cr->prio, prio, &errpos)) < 0) {
		snprintf(err, errlen, "tls.priority \"%s\": %s%s%s",
		    tc->priority ? tc->priority : "NORMAL", gnutls_strerror(r),
		    errpos ? " at " : "", errpos ? errpos : "");
		goto fail;
	}
	return cr;
fail:
	tls_creds_free(cr);
	return NULL;
}

/* --- the server's current credentials ---------------------------------- */

void
tls_server_init(struct tls_server *ts)
{
	pthread_mutex_init(&ts->lock, NULL);
	ts->mode = TLS_OFF;
	ts->creds = NULL;
}

void
tls_server_set(struct tls_server *ts, enum tls_mode mode, struct tls_creds *cr)
{
	pthread_mutex_lock(&ts->lock);
	struct tls_creds *old = ts->creds;
	ts->mode = mode;
	ts->creds = cr;
	pthread_mutex_unlock(&ts->lock);
	tls_creds_unref(old);
}

enum tls_mode
tls_server_get(struct tls_server *ts, struct tls_creds **cr)
{
	pthread_mutex_lock(&ts->lock);
	enum tls_mode mode = ts->mode;
	if (cr)
		*cr = mode == TLS_OFF ? NULL : tls_creds_ref(ts->creds);
	pthread_mutex_unlock(&ts->lock);
	return mode;
}

void
tls_server_destroy(struct tls_server *ts)
{
	tls_creds_unref(ts->creds);
	ts->creds = NULL;
	pthread_mutex_destroy(&ts->lock);
}

/* --- sessions ---------------------------------------------------------- */

static ssize_t
tls_pull(gnutls_transport_ptr_t p, void *buf, size_t len)
{
	struct tls_session *s = p;

	if (s->preoff < s->prelen) {
		size_t n =
		    s->prelen - s->preoff < len ? s->prelen - s->preoff : len;
		memcpy(buf, s->pre + s->preoff, n);
		s->preoff += n;
		return (ssize_t)n;
	}
	ssize_t n = recv(s->fd, buf, len, 0);
	if (n < 0)
		gnutls_transport_set_errno(s->g, errno);
	return n;
}

static ssize_t
tls_vec_push(gnutls_transport_ptr_t p, const giovec_t *iov, int iovcnt)
{
	struct tls_session *s = p;
	struct msghdr msg = { .msg_iov = (struct iovec *)iov,
		.msg_iovlen = (size_t)iovcnt };
	ssize_t n = sendmsg(s->fd, &msg, MSG_NOSIGNAL);

	if (n < 0)
		gnutls_transport_set_errno(s->g, errno);
	return n;
}

struct tls_session *
tls_session_new(struct tls_creds *cr, int fd, const void *pre, size_t prelen)
{
	struct tls_session *s = calloc(1, sizeof *s);

	if (!s)
		return NULL;
	if (prelen) {
		s->pre = malloc(prelen);
		if (!s->pre) {
			free(s);
			return NULL;
		}
		memcpy(s->pre, pre, prelen);
		s->prelen = prelen;
	}
	s->fd = fd;
	if (gnutls_init(&s->g, GNUTLS_SERVER | GNUTLS_NONBLOCK) < 0) {
		free(s->pre);
		free(s);
		return NULL;
	}
	s->cr = tls_creds_ref(cr);
	gnutls_priority_set(s->g, cr->prio);
	if (cr->psk) {
		gnutls_credentials_set(s->g, GNUTLS_CRD_PSK, cr->psk);
	} else {
		gnutls_credentials_set(s->g, GNUTLS_CRD_CERTIFICATE, cr->x509);
		if (cr->verify_peer) {
			gnutls_certificate_server_set_request(s->g,
			    GNUTLS_CERT_REQUIRE);
			gnutls_session_set_verify_cert(s->g, NULL, 0);
		}
	}
	gnutls_session_set_ptr(s->g, s);
	gnutls_transport_set_ptr(s->g, s);
	gnutls_transport_set_pull_function(s->g, tls_pull);
	gnutls_transport_set_vec_push_function(s->g, tls_vec_push);
	/* The connection's own handshake deadline applies. */
	gnutls_handshake_set_timeout(s->g, 0);
	return s;
}

void
tls_session_free(struct tls_session *s)
{
	if (!s)
		return;
	gnutls_deinit(s->g);
	tls_creds_unref(s->cr);
	free(s->pre);
	free(s);
}

static bool
tls_again(int r)
{
	return r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED;
}

enum tls_step
tls_handshake(struct tls_session *s, char *err, size_t errlen)
{
	int r;

	/* Non-fatal alerts: carry on at once. */
	for (int i = 0; i < 8; i++) {
		r = gnutls_handshake(s->g);
		if (r == 0)
			return TLS_DONE;
		if (tls_again(r))
			return TLS_AGAIN;
		if (gnutls_error_is_fatal(r))
			break;
	}
	if (r == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
		gnutls_datum_t out = { NULL, 0 };
		unsigned status = gnutls_session_get_verify_cert_status(s->g);
		if (gnutls_certificate_verification_status_print(status,
			GNUTLS_CRT_X509, &out, 0) == 0) {
			snprintf(err, errlen, "client certificate refused: %s",
			    out.data);
			gnutls_free(out.data);
			return TLS_FAILED;
		}
	}
	snprintf(err, errlen, "%s", gnutls_strerror(r));
	return TLS_FAILED;
}

bool
tls_wants_write(struct tls_session *s)
{
	return gnutls_record_get_direction(s->g) == 1;
}

ssize_t
tls_recv(struct tls_session *s, void *buf, size_t len)
{
	ssize_t r = gnutls_record_recv(s->g, buf, len);

	if (r >= 0)
		return r;
	if (tls_again((int)r)) {
		errno = EAGAIN;
		return -1;
	}
	/* Closed without a TLS goodbye: most clients just close. */
	if (r == GNUTLS_E_PREMATURE_TERMINATION)
		return 0;
	errno = EPROTO;
	return -1;
}

ssize_t
tls_writev(struct tls_session *s, const struct iovec *iov, int n)
{
	ssize_t total = 0;

	for (int i = 0; i < n; i++) {
		size_t off = 0;
		while (off < iov[i].iov_len) {
			ssize_t r = gnutls_record_send(s->g,
			    (const char *)iov[i].iov_base + off,
			    iov[i].iov_len - off);
			if (r < 0) {
				if (total > 0 && tls_again((int)r))
					return total;
				errno = tls_again((int)r) ? EAGAIN : EPIPE;
				return -1;
			}
			off += (size_t)r;
			total += r;
		}
	}
	return total;
}

bool
tls_pending(struct tls_session *s)
{
	return gnutls_record_check_pending(s->g) > 0;
}

void
tls_bye(struct tls_session *s)
{
	gnutls_bye(s->g, GNUTLS_SHUT_WR);
}

const char *
tls_session_psk(struct tls_session *s)
{
	return s->cr->psk ? gnutls_psk_server_get_username(s->g) : NULL;
}

bool
tls_session_cn(struct tls_session *s, char *buf, size_t len)
{
	unsigned n = 0;
	const gnutls_datum_t *peers;
	gnutls_x509_crt_t crt;
	bool ok = false;

	/* Only a certificate the handshake verified names anyone. */
	if (!s->cr->verify_peer || !s->cr->x509)
		return false;
	peers = gnutls_certificate_get_peers(s->g, &n);
	if (!peers || n == 0 || gnutls_x509_crt_init(&crt) < 0)
		return false;
	size_t sz = len;
	if (gnutls_x509_crt_import(crt, &peers[0], GNUTLS_X509_FMT_DER) == 0 &&
	    gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0,
		0, buf, &sz) == 0)
		ok = true;
	gnutls_x509_crt_deinit(crt);
	return ok;
}

void
tls_session_describe(struct tls_session *s, char *buf, size_t len)
{
	const char *v =
	    gnutls_protocol_get_name(gnutls_protocol_get_version(s->g));
	const char *c = gnutls_cipher_get_name(gnutls_cipher_get(s->g));

	snprintf(buf, len, "%s/%s", v ? v : "?", c ? c : "?");
}
