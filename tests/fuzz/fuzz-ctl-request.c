/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz-ctl-request.c - the control-request parser: the input is split
 * into lines as ctl.c splits a client's stream, and each non-empty line
 * goes through ctl_request_parse().
 *
 * Beyond not crashing: a rejected line has a code and a message and
 * leaves nothing allocated; an accepted one is an object whose "cmd" maps
 * to its command.  What the arguments of a command mean is checked by
 * ctl.c against the daemon's state, which no fuzzer here reaches.
 */
#include <string.h>

#include "ctl-request.h"
#include "fuzz.h"

static void
fuzz_check_request(const struct ctl_request *req)
{
	FUZZ_CHECK(json_is_object(req->json));
	FUZZ_CHECK(req->name != NULL);
	FUZZ_CHECK(
	    req->name == json_string_value(json_object_get(req->json, "cmd")));
	switch (req->cmd) {
	case CTL_CMD_VERSION:
		FUZZ_CHECK(!strcmp(req->name, "version"));
		break;
	case CTL_CMD_STATUS:
		FUZZ_CHECK(!strcmp(req->name, "status"));
		break;
	case CTL_CMD_EXPORTS:
		FUZZ_CHECK(!strcmp(req->name, "exports"));
		break;
	case CTL_CMD_TUNE:
		FUZZ_CHECK(!strcmp(req->name, "tune"));
		break;
	case CTL_CMD_FLUSH:
		FUZZ_CHECK(!strcmp(req->name, "flush"));
		break;
	case CTL_CMD_RELOAD:
		FUZZ_CHECK(!strcmp(req->name, "reload"));
		break;
	case CTL_CMD_METRICS:
		FUZZ_CHECK(!strcmp(req->name, "metrics"));
		break;
	case CTL_CMD_UNKNOWN:
		break;
	default:
		FUZZ_CHECK(!"a command outside enum ctl_cmd");
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	const char *end = p + size;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = (size_t)((nl ? nl : end) - p);
		struct ctl_request req;
		const char *code = NULL;
		char msg[512];

		if (len > 0) {
			if (ctl_request_parse(p, len, &req, &code, msg,
				sizeof msg) < 0) {
				FUZZ_CHECK(code != NULL && *code);
				FUZZ_CHECK(
				    memchr(msg, '\0', sizeof msg) != NULL);
				FUZZ_CHECK(msg[0] != '\0');
				FUZZ_CHECK(req.json == NULL);
			} else {
				fuzz_check_request(&req);
				ctl_request_clear(&req);
			}
		}
		p += len + 1;
	}
	return 0;
}
