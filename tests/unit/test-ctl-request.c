/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test-ctl-request.c - a control request line to a command, or to the
 * EPROTO the protocol prescribes (docs/control-protocol.md, Errors).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ctl-request.h"

static void
parse_ok(const char *line, enum ctl_cmd want, const char *name)
{
	struct ctl_request req;
	const char *code = NULL;
	char msg[512] = "";

	if (ctl_request_parse(line, strlen(line), &req, &code, msg,
		sizeof msg) < 0)
		fail_msg("\"%s\" rejected: %s %s", line, code, msg);
	assert_int_equal(req.cmd, want);
	assert_string_equal(req.name, name);
	assert_true(json_is_object(req.json));
	ctl_request_clear(&req);
	assert_null(req.json);
}

static void
parse_fails(const char *line, const char *want_msg)
{
	struct ctl_request req;
	const char *code = NULL;
	char msg[512] = "";

	assert_int_equal(ctl_request_parse(line, strlen(line), &req, &code, msg,
			     sizeof msg),
	    -1);
	assert_string_equal(code, "EPROTO");
	if (!strstr(msg, want_msg))
		fail_msg("\"%s\": message \"%s\" lacks \"%s\"", line, msg,
		    want_msg);
	assert_null(req.json);
	assert_null(req.name);
}

static void
test_every_command_is_known(void **state)
{
	parse_ok("{\"v\": 1, \"cmd\": \"version\"}", CTL_CMD_VERSION,
	    "version");
	parse_ok("{\"v\":1,\"cmd\":\"status\"}", CTL_CMD_STATUS, "status");
	parse_ok("{\"cmd\":\"exports\"}", CTL_CMD_EXPORTS, "exports");
	parse_ok("{\"v\":1,\"cmd\":\"tune\",\"set\":{\"a\":1}}", CTL_CMD_TUNE,
	    "tune");
	parse_ok("{\"v\":1,\"cmd\":\"flush\",\"exports\":[]}", CTL_CMD_FLUSH,
	    "flush");
	parse_ok("{\"v\":1,\"cmd\":\"reload\"}", CTL_CMD_RELOAD, "reload");
	parse_ok("{\"v\":1,\"cmd\":\"metrics\"}", CTL_CMD_METRICS, "metrics");
}

static void
test_unknown_command_parses_for_the_caller_to_refuse(void **state)
{
	parse_ok("{\"v\":1,\"cmd\":\"shutdown\"}", CTL_CMD_UNKNOWN, "shutdown");
	parse_ok("{\"v\":1,\"cmd\":\"Status\"}", CTL_CMD_UNKNOWN, "Status");
	parse_ok("{\"v\":1,\"cmd\":\"\"}", CTL_CMD_UNKNOWN, "");
}

static void
test_malformed_lines_are_eproto(void **state)
{
	parse_fails("status", "expected a JSON object on one line: ");
	parse_fails("[1,2]", "expected a JSON object on one line");
	parse_fails("{\"v\":1,\"cmd\":\"status\",\"cmd\":\"reload\"}",
	    "expected a JSON object on one line: ");
	parse_fails("{\"v\":2,\"cmd\":\"status\"}",
	    "protocol version given not supported; this daemon speaks "
	    "version 1");
	parse_fails("{\"v\":\"1\",\"cmd\":\"status\"}",
	    "protocol version (not a number) not supported");
	parse_fails("{\"v\":1}", "\"cmd\": expected a command name");
	parse_fails("{\"v\":1,\"cmd\":7}", "\"cmd\": expected a command name");
}

static void
test_message_is_cut_to_its_buffer(void **state)
{
	struct ctl_request req;
	const char *code;
	char msg[8];

	assert_int_equal(ctl_request_parse("[]", 2, &req, &code, msg,
			     sizeof msg),
	    -1);
	assert_string_equal(msg, "expecte");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_command_is_known),
		cmocka_unit_test(
		    test_unknown_command_parses_for_the_caller_to_refuse),
		cmocka_unit_test(test_malformed_lines_are_eproto),
		cmocka_unit_test(test_message_is_cut_to_its_buffer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
