/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl-request.c - a control request line to a command, or to the EPROTO
 * the protocol prescribes.  Nothing here knows the daemon: what a command
 * does, and who may do it, is ctl.c's business.
 */
#include <stdio.h>
#include <string.h>

#include "ctl-proto.h"
#include "ctl-request.h"

static const struct {
	const char *name;
	enum ctl_cmd cmd;
} ctl_cmds[] = {
	{ "version", CTL_CMD_VERSION },
	{ "status", CTL_CMD_STATUS },
	{ "exports", CTL_CMD_EXPORTS },
	{ "tune", CTL_CMD_TUNE },
	{ "flush", CTL_CMD_FLUSH },
	{ "reload", CTL_CMD_RELOAD },
	{ "metrics", CTL_CMD_METRICS },
};

int
ctl_request_parse(const char *line, size_t len, struct ctl_request *req,
    const char **code, char *msg, size_t msglen)
{
	json_error_t jerr;
	json_t *jv, *jcmd;

	memset(req, 0, sizeof *req);
	*code = "EPROTO";
	req->json = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!req->json || !json_is_object(req->json)) {
		snprintf(msg, msglen, "expected a JSON object on one line%s%s",
		    req->json ? "" : ": ", req->json ? "" : jerr.text);
		goto fail;
	}
	jv = json_object_get(req->json, "v");
	jcmd = json_object_get(req->json, "cmd");
	if (jv &&
	    (!json_is_integer(jv) ||
		json_integer_value(jv) != CTL_PROTOCOL_VERSION)) {
		snprintf(msg, msglen,
		    "protocol version %s not supported; "
		    "this daemon speaks version %d",
		    json_is_integer(jv) ? "given" : "(not a number)",
		    CTL_PROTOCOL_VERSION);
		goto fail;
	}
	if (!json_is_string(jcmd)) {
		snprintf(msg, msglen, "\"cmd\": expected a command name");
		goto fail;
	}
	req->name = json_string_value(jcmd);
	req->cmd = CTL_CMD_UNKNOWN;
	for (size_t i = 0; i < sizeof ctl_cmds / sizeof ctl_cmds[0]; i++)
		if (!strcmp(req->name, ctl_cmds[i].name))
			req->cmd = ctl_cmds[i].cmd;
	return 0;

fail:
	ctl_request_clear(req);
	return -1;
}

void
ctl_request_clear(struct ctl_request *req)
{
	json_decref(req->json);
	memset(req, 0, sizeof *req);
}
