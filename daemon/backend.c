/*
 * backend.c - choosing a backend for an export's "backing" string, and
 * describing a remote backend's connection state.
 *
 * Runs on the main thread (start-up, reload); backend_describe_state on
 * any thread.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "config.h"

static const char *const backend_uri_schemes[] = {
	"nbd://", "nbds://", "nbd+unix://", "nbds+unix://", NULL
};

bool
backend_is_uri(const char *backing)
{
	for (const char *const *s = backend_uri_schemes; *s; s++)
		if (strncmp(backing, *s, strlen(*s)) == 0)
			return true;
	return false;
}

struct backend *
backend_open(const struct export_conf *ec, const struct remote_conf *rc)
{
	if (backend_is_uri(ec->backing))
		return backend_nbd_open(ec->backing, ec->size_bytes,
		    ec->readonly, rc);
	return backend_file_open(ec->backing, ec->size_bytes, ec->readonly,
	    ec->direct);
}

void
backend_describe_state(struct backend *b, char *buf, size_t len)
{
	struct backend_state st;
	char when[64] = "";
	struct tm tm;

	if (len == 0)
		return;
	buf[0] = '\0';
	if (!b || !b->ops->get_state)
		return;
	b->ops->get_state(b, &st);
	time_t t = (time_t)(st.since_realtime_ns / 1000000000u);
	if (st.since_realtime_ns && localtime_r(&t, &tm))
		strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
	if (st.connected)
		snprintf(buf, len, "connected since %s (%u connection%s)",
		    when, st.connections, st.connections == 1 ? "" : "s");
	else
		snprintf(buf, len, "disconnected since %s, %u retr%s, last "
		    "error: %s", when, st.retries, st.retries == 1 ? "y" : "ies",
		    st.last_error[0] ? st.last_error : "none");
}
