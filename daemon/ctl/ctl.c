/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl.c - the control socket: accepting wbctl clients, reading their
 * newline-delimited JSON requests, checking who may do what, and
 * answering.  Everything here runs on the control thread (wbd-ctl), an
 * ioloop of its own: a slow or hostile control client can stall only other
 * control clients, and only for the time a request takes, never NBD
 * traffic.  FLUSH work runs on the devices' pools and completes back here
 * through the control thread's mailbox.
 *
 * A client is closed (ctl_client_close) wherever its socket fails, which
 * may be deep inside a callback that still uses it; it is freed only by
 * ctl_client_reap(), which every callback calls last.
 *
 * Authorisation: SO_PEERCRED is read once per connection; reading needs
 * nothing more than being able to connect (the socket's mode and group),
 * changing anything needs uid 0 or membership of control.admin_group.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "activation.h"
#include "atomics.h"
#include "buf.h"
#include "cache.h"
#include "clock.h"
#include "ctl-request.h"
#include "ctl-status.h"
#include "ctl.h"
#include "daemon.h"
#include "export.h"
#include "ioloop.h"
#include "listener.h"
#include "log.h"
#include "service.h"
#include "metrics.h"
#include "reload.h"
#include "ratelimit.h"
#include "utf8.h"
#include "wbdev.h"
#include "writeback.h"

#define CTL_MAX_LINE            (64u << 10)
/* Clients at once (control.max_clients); the last control.admin_reserved
 * only for root and the admin group, and at most
 * control.max_clients_per_uid for one uid, so that nobody can lock root
 * out.  A client that sends no whole request for control.idle_timeout_s
 * (and waits for no flush) is closed, however many bytes of one it sends
 * meanwhile: the timeout is from its last whole request, not its last
 * byte; wbctl status --watch asks every 2 s. */
/* A client's answers not yet read: beyond this, it is not read. */
#define CTL_MAX_UNSENT (1u << 20)
#define CTL_REFUSE_LOG_NS (10ull * 1000000000ull)
#define CTL_PROGRESS_S          0.5
#define CTL_SAMPLE_S            1.0

struct ctl_client;

struct ctl_state {
	struct daemon *d;
	struct ioloop *io;
	ev_io accept_w;
	ev_timer sample;                /* writeback bandwidth */
	struct ctl_client *clients;
	unsigned n_clients;
	gid_t admin_gid;
	bool have_admin_gid;
	struct job stop_msg;            /* made with the state: stopping
					 * cannot fail */
	struct ratelimit refuse_log;
	struct ratelimit change_log; /* changes refused (EPERM) */
	struct ratelimit idle_log;   /* idle clients closed */
	struct ratelimit long_log;   /* requests too long */
};

struct ctl_flush_job {
	struct job job;
	struct ctl_flush *fl;
	struct export *e;
	uint64_t seq;
	int r;
};

/*
 * A flush in progress for one client request.  Everything it needs until
 * it answers is allocated with it, before any work is queued: once queued,
 * it always completes and answers.
 */
struct ctl_flush {
	struct ctl_client *cl;          /* NULL once the client has gone */
	unsigned pending;               /* jobs not done, +1 until all queued */
	int err;
	json_t *names;
	bool progress;
	uint64_t total_bytes;           /* dirty when the flush began */
	ev_timer progress_t;
	struct export **exports;        /* each held (export_hold) */
	struct ctl_flush_job *jobs;     /* one per export */
	struct ctl_flush_job queued;    /* drops the +1 */
	size_t n;
};

struct ctl_client {
	struct ctl_client *next, *prev;
	struct ctl_state *cs;
	int fd;
	ev_io rw, ww;
	uid_t uid;
	gid_t gid;
	pid_t pid;
	bool admin;
	struct buf in, out;
	size_t out_off;
	bool closing;                   /* close once OUT is sent */
	bool discarding;                /* answered EPROTO: read to EOF */
	bool out_full;                  /* not read: answers not read */
	uint64_t last_ns;               /* its last whole request, or its
	                                   connecting (idle timeout) */
	struct ctl_flush *flush;        /* a FLUSH being waited for */
};

static void ctl_client_close(struct ctl_client *cl);
static void ctl_client_reap(struct ctl_client *cl);
static void ctl_stop_msg(struct job *job);
static void ctl_process(struct ctl_client *cl);

/* --- output ------------------------------------------------------------ */

static void
ctl_flush_out(struct ctl_client *cl)
{
	while (cl->out_off < cl->out.len) {
		ssize_t n = write(cl->fd, cl->out.data + cl->out_off,
		    cl->out.len - cl->out_off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				ev_io_start(cl->cs->io->loop, &cl->ww);
				return;
			}
			ctl_client_close(cl);
			return;
		}
		cl->out_off += (size_t)n;
	}
	buf_reset(&cl->out);
	cl->out_off = 0;
	ev_io_stop(cl->cs->io->loop, &cl->ww);
	if (cl->discarding)
		shutdown(cl->fd, SHUT_WR);
	if (cl->closing)
		ctl_client_close(cl);
}

/* Send O (stolen) as one line. */
static void
ctl_send(struct ctl_client *cl, json_t *o)
{
	/* Reals (writeback CPU) with 6 significant digits, not 17. */
	char *s =
	    o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;

	json_decref(o);
	if (!s) {
		static const char oom[] = "{\"ok\":false,\"v\":1,\"code\":"
		    "\"ENOMEM\",\"error\":\"out of memory\"}\n";
		buf_put(&cl->out, oom, sizeof oom - 1);
	} else {
		buf_put(&cl->out, s, strlen(s));
		buf_put(&cl->out, "\n", 1);
		free(s);
	}
	ctl_flush_out(cl);
}

static void
ctl_error(struct ctl_client *cl, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
ctl_error(struct ctl_client *cl, const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	ctl_send(cl, json_pack("{s:b, s:i, s:s, s:s}", "ok", 0,
	    "v", CTL_PROTOCOL_VERSION, "code", code, "error", msg));
}

static json_t *
ctl_ok(void)
{
	return json_pack("{s:b, s:i}", "ok", 1, "v", CTL_PROTOCOL_VERSION);
}

/*
 * A change (tune KEY=VALUE, flush, reload) asked for by a client that is
 * neither root nor in control.admin_group: answered EPERM every time
 * (WHAT, as the answer names it), and logged with who asked (CMD) at most
 * once in 10 s, with the count of those not logged, so that a script
 * retrying in a loop cannot fill the log.
 */
static void
ctl_refuse_change(struct ctl_client *cl, const char *cmd, const char *what)
{
	const char *group = cl->cs->d->cfg.control.admin_group;
	unsigned quiet;

	ctl_error(cl, "EPERM",
	    "%s needs uid 0 or membership of "
	    "control.admin_group%s%s (you are uid %u)",
	    what, group ? " " : "", group ? group : "", (unsigned)cl->uid);
	if (ratelimit_due(&cl->cs->change_log, CTL_REFUSE_LOG_NS, &quiet))
		log_warnx("control: refused %s to uid %u (pid %d): it needs "
			  "uid 0 or membership of control.admin_group%s%s "
			  "(%u more refused changes not logged)",
		    cmd, (unsigned)cl->uid, (int)cl->pid, group ? " " : "",
		    group ? group : "", quiet);
}

/* --- flush ------------------------------------------------------------- */

static uint64_t
ctl_flush_remaining(struct ctl_flush *fl, uint32_t page_size)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < fl->n; i++) {
		uint64_t cached, dirty;
		cache_file_stats(fl->exports[i]->cf, &cached, &dirty);
		sum += (dirty + cache_file_writeback_pages(fl->exports[i]->cf)) *
		    page_size;
	}
	return sum;
}

static void
ctl_flush_free(struct ctl_flush *fl, struct ev_loop *loop)
{
	ev_timer_stop(loop, &fl->progress_t);
	json_decref(fl->names);
	for (size_t i = 0; i < fl->n; i++)
		export_release(fl->exports[i]);
	free(fl->exports);
	free(fl->jobs);
	free(fl);
}

static void
ctl_flush_progress_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct ctl_flush *fl = w->data;

	if (!fl->cl)
		return;
	uint64_t left = ctl_flush_remaining(fl, fl->cl->cs->d->wb.page_size);
	/* Data dirtied after the flush began is not waited for: cap it. */
	if (left > fl->total_bytes)
		left = fl->total_bytes;
	struct ctl_client *cl = fl->cl;
	ctl_send(cl, json_pack("{s:{s:I, s:I}}", "progress",
	    "remaining_bytes", (json_int_t)left,
	    "total_bytes", (json_int_t)fl->total_bytes));
	ctl_client_reap(cl);
}

static void
ctl_flush_job_run(struct job *job)
{
	struct ctl_flush_job *fj = (struct ctl_flush_job *)job;

	_Atomic unsigned *counter = &fj->e->dev->work_by_reason[WB_REASON_SYNC];
	fj->r = export_flush(fj->e, fj->seq, WB_REASON_SYNC);
	sub_relaxed(counter, 1);
	if (fj->r < 0) {
		/* Report the cause (ENOSPC, ...) rather than plain EIO. */
		int err = wb_target_last_err(&fj->e->wt);
		if (err)
			fj->r = -err;
	}
}

static void
ctl_flush_job_done(struct job *job)
{
	struct ctl_flush_job *fj = (struct ctl_flush_job *)job;
	struct ctl_flush *fl = fj->fl;
	struct ev_loop *loop = ioloop_of(job->owner)->loop;

	if (fj->r < 0 && !fl->err)
		fl->err = -fj->r;
	if (--fl->pending > 0)
		return;
	struct ctl_client *cl = fl->cl;
	if (cl) {
		cl->flush = NULL;
		if (fl->err)
			ctl_error(cl, "EIO", "writeback or flush failed: %s (the "
			    "data stays dirty and is retried)",
			    strerror(fl->err));
		/* fl->err is the cause; the code stays EIO (protocol). */
		else {
			json_t *o = ctl_ok();
			json_object_set(o, "flushed", fl->names);
			ctl_send(cl, o);
		}
	}
	ctl_flush_free(fl, loop);
	if (cl && cl->fd >= 0 && !cl->closing) {
		ev_io_start(loop, &cl->rw);
		ctl_process(cl);       /* requests sent meanwhile */
	}
	if (cl)
		ctl_client_reap(cl);
}

static void
ctl_cmd_flush(struct ctl_client *cl, json_t *req)
{
	struct daemon *d = cl->cs->d;
	json_t *names = json_object_get(req, "exports");
	json_t *wait = json_object_get(req, "wait");
	json_t *progress = json_object_get(req, "progress");
	struct ctl_flush *fl = calloc(1, sizeof *fl);
	size_t i;
	json_t *v;

	if (!fl) {
		ctl_error(cl, "ENOMEM", "out of memory");
		return;
	}
	ev_timer_init(&fl->progress_t, ctl_flush_progress_cb, CTL_PROGRESS_S,
	    CTL_PROGRESS_S);
	fl->progress_t.data = fl;
	size_t slots = export_table_count(&d->exports);
	struct export *e;
	fl->exports = calloc(slots + 1, sizeof *fl->exports);
	fl->jobs = calloc(slots + 1, sizeof *fl->jobs);
	fl->names = json_array();
	if (!fl->exports || !fl->jobs || !fl->names) {
		ctl_flush_free(fl, cl->cs->io->loop);
		ctl_error(cl, "ENOMEM", "out of memory");
		return;
	}
	if (names && !json_is_array(names)) {
		ctl_flush_free(fl, cl->cs->io->loop);
		ctl_error(cl, "EINVAL", "\"exports\": expected a list of names");
		return;
	}
	if (!names || json_array_size(names) == 0) {
		export_table_foreach(&d->exports, j, e) {
			if (j < slots && !export_retired(e)) {
				export_hold(e);
				fl->exports[fl->n++] = e;
			}
		}
	} else {
		json_array_foreach(names, i, v) {
			const char *name = json_string_value(v); /* or NULL */
			e = name ? export_table_find(&d->exports, name) : NULL;
			if (!e || !*name) {
				ctl_flush_free(fl, cl->cs->io->loop);
				ctl_error(cl, "ENOENT",
				    "no export named \"%s\"",
				    name ? name : "(not a string)");
				return;
			}
			bool dup = false;
			for (size_t j = 0; j < fl->n; j++)
				dup |= fl->exports[j] == e;
			if (!dup && fl->n < slots) {
				export_hold(e);
				fl->exports[fl->n++] = e;
			}
		}
	}
	for (i = 0; i < fl->n; i++) {
		if (json_array_append_new(fl->names,
		    json_string(fl->exports[i]->name)) < 0) {
			ctl_flush_free(fl, cl->cs->io->loop);
			ctl_error(cl, "ENOMEM", "out of memory");
			return;
		}
	}
	log_info("control: flush of %zu export(s) requested by uid %u (pid %d)",
	    fl->n, (unsigned)cl->uid, (int)cl->pid);

	bool do_wait = !wait || json_is_true(wait);
	fl->progress = do_wait && json_is_true(progress);
	fl->pending = (unsigned)fl->n + 1;      /* +1 until all are queued */
	fl->cl = do_wait ? cl : NULL;
	/* What there is to write, measured before the workers start on it:
	 * a quick flush would otherwise show 0 of 0. */
	fl->total_bytes =
	    fl->progress ? ctl_flush_remaining(fl, d->wb.page_size) : 0;
	for (i = 0; i < fl->n; i++) {
		struct ctl_flush_job *fj = &fl->jobs[i];
		fj->fl = fl;
		fj->e = fl->exports[i];
		fj->seq = load_acquire(&fj->e->write_seq);
		fj->job.run = ctl_flush_job_run;
		fj->job.done = ctl_flush_job_done;
		fj->job.owner = &cl->cs->io->owner;
		add_relaxed(&fj->e->dev->work_by_reason[WB_REASON_SYNC], 1);
		pool_submit(fj->e->dev->pool, &fj->job);
	}
	if (!do_wait) {
		json_t *o = ctl_ok();
		json_object_set(o, "flushed", fl->names);
		json_object_set_new(o, "queued", json_true());
		ctl_send(cl, o);
	} else {
		cl->flush = fl;
		/* One request at a time per client: read on when done. */
		ev_io_stop(cl->cs->io->loop, &cl->rw);
		if (fl->progress) {
			uint64_t total = fl->total_bytes;
			ctl_send(cl, json_pack("{s:{s:I, s:I}}", "progress",
			    "remaining_bytes", (json_int_t)total,
			    "total_bytes", (json_int_t)total));
			if (fl->cl)     /* still there after that send */
				ev_timer_start(cl->cs->io->loop, &fl->progress_t);
		}
	}
	/* Drop the +1; completes at once if every job already finished. */
	fl->queued.fl = fl;
	fl->queued.job.owner = &cl->cs->io->owner;
	fl->queued.job.done = ctl_flush_job_done;
	ioloop_post(cl->cs->io, &fl->queued.job);
}

/* --- the other commands ------------------------------------------------ */

static void
ctl_cmd_tune(struct ctl_client *cl, json_t *req)
{
	struct daemon *d = cl->cs->d;
	json_t *set = json_object_get(req, "set");
	char err[512];

	if (!set) {
		json_t *o = ctl_ok();
		json_object_set_new(o, "tunables", tune_list_json(d));
		ctl_send(cl, o);
		return;
	}
	if (!cl->admin) {
		ctl_refuse_change(cl, "tune", "changing settings");
		return;
	}
	json_t *changed = json_array();
	if (tune_set(d, set, changed, err, sizeof err) < 0) {
		json_decref(changed);
		ctl_error(cl, "EINVAL", "%s", err);
		return;
	}
	char *what = json_dumps(set, JSON_COMPACT);
	log_info("control: uid %u (pid %d) tuned %s", (unsigned)cl->uid,
	    (int)cl->pid, what ? what : "");
	free(what);
	json_t *o = ctl_ok();
	json_object_set_new(o, "changed", changed);
	ctl_send(cl, o);
}

static void
ctl_cmd_reload(struct ctl_client *cl)
{
	char msg[1024];

	log_info("control: reload requested by uid %u (pid %d)",
	    (unsigned)cl->uid, (int)cl->pid);
	if (service_reload(cl->cs->d, msg, sizeof msg) < 0) {
		ctl_error(cl, "EINVAL", "%s", msg);
		return;
	}
	json_t *o = ctl_ok();
	json_object_set_new(o, "message", json_string(msg));
	ctl_send(cl, o);
}

/* The Prometheus exposition, as one JSON string. */
static void
ctl_cmd_metrics(struct ctl_client *cl)
{
	size_t len;
	char *text = metrics_render(cl->cs->d, &len);
	json_t *o = text ? ctl_ok() : NULL;

	if (o) {
		json_object_set_new(o, "content_type",
		    json_string(METRICS_CONTENT_TYPE));
		json_object_set_new(o, "text", json_stringn(text, len));
	}
	free(text);
	if (o)
		ctl_send(cl, o);
	else
		ctl_error(cl, "ENOMEM", "out of memory");
}

static void
ctl_dispatch(struct ctl_client *cl, const char *line, size_t len)
{
	struct daemon *d = cl->cs->d;
	struct ctl_request req;
	const char *code, *cmd;
	char msg[512];

	if (ctl_request_parse(line, len, &req, &code, msg, sizeof msg) < 0) {
		ctl_error(cl, code, "%s", msg);
		return;
	}
	cmd = req.name;
	/* Shutting down: the status (which says so, and what is left to
	 * write back) and the version, nothing else. */
	if (load_acquire(&d->stopping) && req.cmd != CTL_CMD_STATUS &&
	    req.cmd != CTL_CMD_VERSION) {
		ctl_error(cl, "EBUSY", "wbd is shutting down");
		goto out;
	}
	switch (req.cmd) {
	case CTL_CMD_VERSION: {
		json_t *o = ctl_ok();
		json_object_set_new(o, "daemon_version", json_string(WBD_VERSION));
		json_object_set_new(o, "protocol", json_integer(CTL_PROTOCOL_VERSION));
		ctl_send(cl, o);
		break;
	}
	case CTL_CMD_STATUS: {
		json_t *o = ctl_status_json(d);
		if (!o && load_acquire(&d->stopping))
			ctl_error(cl, "EBUSY", "wbd is shutting down");
		else
			ctl_send(cl, o);
		break;
	}
	case CTL_CMD_EXPORTS:
		ctl_send(cl, ctl_exports_json(d));
		break;
	case CTL_CMD_METRICS:
		ctl_cmd_metrics(cl);
		break;
	case CTL_CMD_TUNE:
		ctl_cmd_tune(cl, req.json);
		break;
	case CTL_CMD_FLUSH:
	case CTL_CMD_RELOAD:
		if (!cl->admin)
			ctl_refuse_change(cl, cmd, cmd);
		else if (req.cmd == CTL_CMD_FLUSH)
			ctl_cmd_flush(cl, req.json);
		else
			ctl_cmd_reload(cl);
		break;
	case CTL_CMD_UNKNOWN:
		ctl_error(cl, "EPROTO", "unknown command \"%.*s\"",
		    (int)utf8_prefix_len(cmd, 64), cmd);
		break;
	}
out:
	ctl_request_clear(&req);
}

/* --- input ------------------------------------------------------------- */

static void
ctl_process(struct ctl_client *cl)
{
	size_t start = 0;

	while (!cl->closing && !cl->discarding && !cl->flush && cl->fd >= 0) {
		if (cl->out.len - cl->out_off > CTL_MAX_UNSENT) {
			/* Answers pile up unread: read no more until they
			 * have gone (ctl_write_cb). */
			cl->out_full = true;
			ev_io_stop(cl->cs->io->loop, &cl->rw);
			break;
		}
		uint8_t *nl = memchr(cl->in.data + start, '\n',
		    cl->in.len - start);
		if (!nl)
			break;
		size_t len = (size_t)(nl - (cl->in.data + start));
		cl->last_ns = now_ns();
		if (len > 0)
			ctl_dispatch(cl, (char *)cl->in.data + start, len);
		start += len + 1;
	}
	if (cl->fd < 0)
		return;
	if (start > 0) {
		memmove(cl->in.data, cl->in.data + start, cl->in.len - start);
		cl->in.len -= start;
	}
	if (cl->in.len > CTL_MAX_LINE) {
		unsigned quiet;
		add_relaxed(&cl->cs->d->ctl_oversized, 1);
		if (ratelimit_due(&cl->cs->long_log, CTL_REFUSE_LOG_NS, &quiet))
			log_warnx("control: a request of a client of uid %u is "
				  "longer than %u bytes: refused (%u more not "
				  "logged)",
			    (unsigned)cl->uid, CTL_MAX_LINE, quiet);
		ctl_error(cl, "EPROTO", "request longer than %u bytes",
		    CTL_MAX_LINE);
		/* Half-close and discard what still comes, so that the
		 * client reads the answer instead of a reset. */
		cl->discarding = true;
		buf_reset(&cl->in);
		if (cl->fd >= 0 && cl->out.len == 0)
			shutdown(cl->fd, SHUT_WR);
	}
}

static void
ctl_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ctl_client *cl = w->data;
	uint8_t tmp[4096];
	ssize_t n = read(cl->fd, tmp, sizeof tmp);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0)
		ctl_client_close(cl);
	else if (!cl->discarding) {
		buf_put(&cl->in, tmp, (size_t)n);
		if (cl->in.oom)
			ctl_client_close(cl);
		else
			ctl_process(cl);
	}
	ctl_client_reap(cl);
}

static void
ctl_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ctl_client *cl = w->data;

	ctl_flush_out(cl);
	if (cl->out_full && cl->fd >= 0 &&
	    cl->out.len - cl->out_off <= CTL_MAX_UNSENT / 2) {
		cl->out_full = false;
		if (!cl->flush)
			ev_io_start(loop, &cl->rw);
		ctl_process(cl); /* what it sent meanwhile */
	}
	ctl_client_reap(cl);
}

/* Close CL's socket and stop its watchers; safe to call twice.  CL stays
 * allocated until ctl_client_reap(). */
static void
ctl_client_close(struct ctl_client *cl)
{
	struct ctl_state *cs = cl->cs;

	if (cl->fd < 0)
		return;
	ev_io_stop(cs->io->loop, &cl->rw);
	ev_io_stop(cs->io->loop, &cl->ww);
	close(cl->fd);
	cl->fd = -1;
	if (cl->flush) {
		/* The flush goes on; nobody is told. */
		cl->flush->cl = NULL;
		ev_timer_stop(cs->io->loop, &cl->flush->progress_t);
		cl->flush = NULL;
	}
}

/* Free CL if it has been closed: the last thing a callback does with it. */
static void
ctl_client_reap(struct ctl_client *cl)
{
	struct ctl_state *cs = cl->cs;

	if (cl->fd >= 0)
		return;
	if (cl->prev)
		cl->prev->next = cl->next;
	else
		cs->clients = cl->next;
	if (cl->next)
		cl->next->prev = cl->prev;
	cs->n_clients--;
	store_relaxed(&cs->d->ctl_clients, cs->n_clients);
	buf_free(&cl->in);
	buf_free(&cl->out);
	free(cl);
}

static bool
ctl_is_admin(struct ctl_state *cs, uid_t uid, gid_t gid)
{
	if (uid == 0)
		return true;
	if (!cs->have_admin_gid)
		return false;
	if (gid == cs->admin_gid)
		return true;
	struct passwd pw, *pwp;
	char buf[4096];
	if (getpwuid_r(uid, &pw, buf, sizeof buf, &pwp) != 0 || !pwp)
		return false;
	gid_t groups[256];
	int ng = 256;
	if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &ng) < 0)
		return false;
	for (int i = 0; i < ng; i++)
		if (groups[i] == cs->admin_gid)
			return true;
	return false;
}

/* Why a client of UID may not connect now, or NULL. */
static const char *
ctl_refusal(struct ctl_state *cs, uid_t uid, gid_t gid)
{
	unsigned same = 0;

	const struct control_conf *cc = &cs->d->cfg.control;

	if (cs->n_clients >= cc->max_clients)
		return "every slot is taken (control.max_clients)";
	for (struct ctl_client *cl = cs->clients; cl; cl = cl->next)
		same += cl->fd >= 0 && cl->uid == uid;
	if (same >= cc->max_clients_per_uid)
		return "this uid has as many clients as one may "
		       "(control.max_clients_per_uid)";
	if (cs->n_clients >= cc->max_clients - cc->admin_reserved &&
	    !ctl_is_admin(cs, uid, gid))
		return "the remaining slots are kept for root and the admin "
		       "group (control.admin_reserved)";
	return NULL;
}

/* Close the clients idle for control.idle_timeout_s (not waiting for a
 * flush). */
static void
ctl_close_idle(struct ctl_state *cs, uint64_t now)
{
	unsigned s = cs->d->cfg.control.idle_timeout_s, quiet;

	if (s == 0)
		return;
	for (struct ctl_client *cl = cs->clients, *next; cl; cl = next) {
		next = cl->next;
		if (cl->fd < 0 || cl->flush ||
		    now - cl->last_ns < s * 1000000000ull)
			continue;
		add_relaxed(&cs->d->ctl_idle_closed, 1);
		if (ratelimit_due(&cs->idle_log, CTL_REFUSE_LOG_NS, &quiet))
			log_info("control: closing a client of uid %u idle for "
				 "%u s (control.idle_timeout_s) (%u more not "
				 "logged)",
			    (unsigned)cl->uid, s, quiet);
		ctl_client_close(cl);
		ctl_client_reap(cl);
	}
}

/* Tell a refused client why, in one answer line it may read before the
 * close (wbctl does even if its request could not be sent), not just a
 * broken pipe.  Never waits: what the socket cannot take is dropped. */
static void
ctl_refuse_with(int fd, const char *why)
{
	json_t *o = json_pack("{s:b, s:i, s:s, s:s+}", "ok", 0, "v",
	    CTL_PROTOCOL_VERSION, "code", "EBUSY", "error",
	    "wbd refused the connection: ", why);
	char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	if (line) {
		size_t n = strlen(line);
		line[n] = '\n'; /* json_dumps' NUL: the line's end */
		(void)!send(fd, line, n + 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		free(line);
	}
}

static void
ctl_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ctl_state *cs = w->data;
	int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct ucred cred;
	socklen_t len = sizeof cred;

	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		log_warn("control: SO_PEERCRED");
		close(fd);
		return;
	}
	const char *why = ctl_refusal(cs, cred.uid, cred.gid);
	if (why) {
		unsigned quiet;
		add_relaxed(&cs->d->ctl_refused, 1);
		if (ratelimit_due(&cs->refuse_log, CTL_REFUSE_LOG_NS, &quiet))
			log_warnx("control: refused a client of uid %u: %s "
				  "(%u more refusals not logged)",
			    (unsigned)cred.uid, why, quiet);
		ctl_refuse_with(fd, why);
		close(fd);
		return;
	}
	struct ctl_client *cl = calloc(1, sizeof *cl);
	if (!cl) {
		close(fd);
		return;
	}
	cl->cs = cs;
	cl->fd = fd;
	cl->uid = cred.uid;
	cl->gid = cred.gid;
	cl->pid = cred.pid;
	cl->admin = ctl_is_admin(cs, cred.uid, cred.gid);
	cl->last_ns = now_ns();
	buf_init(&cl->in);
	buf_init(&cl->out);
	ev_io_init(&cl->rw, ctl_read_cb, fd, EV_READ);
	ev_io_init(&cl->ww, ctl_write_cb, fd, EV_WRITE);
	cl->rw.data = cl->ww.data = cl;
	cl->next = cs->clients;
	if (cs->clients)
		cs->clients->prev = cl;
	cs->clients = cl;
	cs->n_clients++;
	store_relaxed(&cs->d->ctl_clients, cs->n_clients);
	ev_io_start(loop, &cl->rw);
	log_debug("control: client uid %u pid %d%s", (unsigned)cred.uid,
	    (int)cred.pid, cl->admin ? " (admin)" : "");
}

/* Each device's writeback rate and CPU share, sampled once a second
 * (wb_dev_sample). */
static void
ctl_sample_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct ctl_state *cs = w->data;
	struct daemon *d = cs->d;
	uint64_t now = now_ns();

	ctl_close_idle(cs, now);
	for (size_t i = 0; i < daemon_n_devs(d); i++)
		wb_dev_sample(d->devs[i], now);
}

/* --- life cycle -------------------------------------------------------- */

int
ctl_open(struct daemon *d)
{
	const struct control_conf *cc = &d->cfg.control;

	d->ctl_fd = -1;
	if (!cc->socket) {
		log_info("control socket disabled (control.socket = \"none\")");
		return 0;
	}
	/* A socket from systemd has the mode and group its unit gave it
	 * (SocketMode=, SocketGroup=). */
	d->ctl_fd = activation_claim_unix(&d->act, cc->socket);
	if (d->ctl_fd >= 0) {
		d->ctl_passed = true;
		log_info("control socket %s (socket from systemd)", cc->socket);
		return 0;
	}
	d->ctl_fd = unix_listen(cc->socket, "control socket", (int)cc->mode);
	if (d->ctl_fd < 0)
		return -1;
	if (cc->group) {
		struct group *g = getgrnam(cc->group);
		if (!g) {
			log_errorx("control.group \"%s\": no such group",
			    cc->group);
			goto fail;
		}
		if (chown(cc->socket, (uid_t)-1, g->gr_gid) < 0) {
			log_error("control socket %s: chown to group %s",
			    cc->socket, cc->group);
			goto fail;
		}
	}
	log_info("control socket %s (mode %04o%s%s)", cc->socket, cc->mode,
	    cc->group ? ", group " : "", cc->group ? cc->group : "");
	return 0;
fail:
	close(d->ctl_fd);
	d->ctl_fd = -1;
	unlink(cc->socket);
	return -1;
}

int
ctl_start(struct daemon *d)
{
	if (d->ctl_fd < 0)
		return 0;
	struct ctl_state *cs = calloc(1, sizeof *cs);
	if (!cs) {
		log_errorx("control socket: out of memory");
		return -1;
	}
	cs->d = d;
	if (d->cfg.control.admin_group) {
		struct group *g = getgrnam(d->cfg.control.admin_group);
		if (g) {
			cs->admin_gid = g->gr_gid;
			cs->have_admin_gid = true;
		} else {
			log_warnx("control.admin_group \"%s\": no such group; "
			    "only root may change settings",
			    d->cfg.control.admin_group);
		}
	}
	cs->io = ioloop_new(d, 0);
	if (!cs->io) {
		log_errorx("control socket: cannot set up its thread: out of "
			   "memory");
		free(cs);
		return -1;
	}
	cs->io->grace = &d->grace;
	ev_io_init(&cs->accept_w, ctl_accept_cb, d->ctl_fd, EV_READ);
	cs->accept_w.data = cs;
	ev_io_start(cs->io->loop, &cs->accept_w);
	ev_timer_init(&cs->sample, ctl_sample_cb, CTL_SAMPLE_S, CTL_SAMPLE_S);
	cs->sample.data = cs;
	ev_timer_start(cs->io->loop, &cs->sample);
	cs->stop_msg.done = ctl_stop_msg;
	cs->stop_msg.owner = &cs->io->owner;
	d->ctl = cs;
	d->ctl_io = cs->io;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int r = ioloop_start_named(cs->io, "wbd-ctl");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		ioloop_free(cs->io);
		free(cs);
		d->ctl = NULL;
		d->ctl_io = NULL;
		return -1;
	}
	return 0;
}

/* On the control thread: close everything and leave the loop. */
static void
ctl_stop_msg(struct job *job)
{
	struct ctl_state *cs = container_of(job, struct ctl_state, stop_msg);

	ev_io_stop(cs->io->loop, &cs->accept_w);
	ev_timer_stop(cs->io->loop, &cs->sample);
	while (cs->clients) {
		ctl_client_close(cs->clients);
		ctl_client_reap(cs->clients);
	}
	ev_break(cs->io->loop, EVBREAK_ALL);
}

void
ctl_stop(struct daemon *d)
{
	struct ctl_state *cs = d->ctl;

	if (cs) {
		ioloop_post(cs->io, &cs->stop_msg);
		ioloop_join(cs->io);
		ioloop_free(cs->io);
		free(cs);
		d->ctl = NULL;
		d->ctl_io = NULL;
	}
	if (d->ctl_fd >= 0) {
		close(d->ctl_fd);
		d->ctl_fd = -1;
		/* A socket systemd passed is the socket unit's to remove. */
		if (d->cfg.control.socket && !d->ctl_passed)
			unix_unlink(d->cfg.control.socket);
	}
}
