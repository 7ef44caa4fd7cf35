/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl-request.h - one control request line, parsed and checked before
 * anything acts on it: a JSON object on one line, a protocol version this
 * daemon speaks, a command name.  Pure: no daemon state, any thread (the
 * control thread calls it).  The protocol is docs/control-protocol.md.
 */
#ifndef WBD_CTL_REQUEST_H
#define WBD_CTL_REQUEST_H

#include <jansson.h>
#include <stddef.h>

enum ctl_cmd {
	CTL_CMD_UNKNOWN, /* a string, but no command wbd knows */
	CTL_CMD_VERSION,
	CTL_CMD_STATUS,
	CTL_CMD_EXPORTS,
	CTL_CMD_TUNE,
	CTL_CMD_FLUSH,
	CTL_CMD_RELOAD,
	CTL_CMD_METRICS,
};

struct ctl_request {
	json_t *json;     /* the whole request, owned */
	const char *name; /* its "cmd", valid while JSON lives */
	enum ctl_cmd cmd;
};

/*
 * Parse LINE (LEN bytes, without its newline) into *REQ.  Returns 0, or
 * -1 with the protocol's error code in *CODE ("EPROTO") and the message
 * for the client in MSG (up to MSGLEN bytes); *REQ is then empty.  An
 * unknown command parses (CTL_CMD_UNKNOWN): the caller decides when to
 * say so.
 */
int ctl_request_parse(const char *line, size_t len, struct ctl_request *req,
    const char **code, char *msg, size_t msglen);

void ctl_request_clear(struct ctl_request *req);

#endif
