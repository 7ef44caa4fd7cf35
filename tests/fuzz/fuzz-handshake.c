/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz-handshake.c - the option parser (hs_client_flags, hs_option) fed a
 * client's side of the handshake, as conn.c would: 4 bytes of client
 * flags, then options (IHAVEOPT magic, option, length, data) until the
 * handshake ends, the magic is wrong or the input runs out.  Two fake
 * exports stand behind the lookup callbacks; the client may not open the
 * second (an allow list refuses it).
 *
 * Beyond not crashing, it checks what the client would read: every option
 * that does not end the handshake is answered with well-framed replies to
 * that very option, the last of them an ACK or an error.
 */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fuzz.h"
#include "handshake.h"
#include "log.h"
#include "nbd-proto.h"

static const struct hs_export fuzz_exports[] = {
	{ .name = "disk0",
	    .description = "scratch disk",
	    .size_bytes = 1 << 20,
	    .tflags =
		NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA,
	    .max_block_bytes = 32 << 20 },
	{ .name = "ro",
	    .description = NULL,
	    .size_bytes = 4096,
	    .tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_READ_ONLY,
	    .max_block_bytes = 32 << 20 },
};
#define N_EXPORTS (sizeof fuzz_exports / sizeof fuzz_exports[0])

static const struct hs_export *
fuzz_lookup(void *arg, const char *name)
{
	if (!*name)
		return &fuzz_exports[0];
	for (size_t i = 0; i < N_EXPORTS; i++)
		if (!strcmp(fuzz_exports[i].name, name))
			return &fuzz_exports[i];
	return NULL;
}

static const struct hs_export *
fuzz_nth(void *arg, size_t i)
{
	return i < N_EXPORTS ? &fuzz_exports[i] : NULL;
}

static bool
fuzz_may_open(void *arg, const struct hs_export *e, bool listing)
{
	return e != &fuzz_exports[1];
}

/* OUT holds whole replies to OPT, the last one final (ACK or error). */
static void
fuzz_check_replies(const struct buf *out, uint32_t opt)
{
	size_t pos = 0;
	uint32_t type = 0;

	FUZZ_CHECK(!out->oom);
	FUZZ_CHECK(out->len >= 20);
	while (pos < out->len) {
		FUZZ_CHECK(out->len - pos >= 20);
		const uint8_t *p = out->data + pos;
		FUZZ_CHECK(get_u64(p) == NBD_REP_MAGIC);
		FUZZ_CHECK(get_u32(p + 8) == opt);
		type = get_u32(p + 12);
		uint32_t len = get_u32(p + 16);
		FUZZ_CHECK(len <= out->len - pos - 20);
		/* Only the last reply may be final. */
		if (pos + 20 + len < out->len)
			FUZZ_CHECK(type != NBD_REP_ACK &&
			    !(type & NBD_REP_FLAG_ERROR));
		pos += 20 + len;
	}
	FUZZ_CHECK(type == NBD_REP_ACK || (type & NBD_REP_FLAG_ERROR));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hs_ctx hs = { .lookup = fuzz_lookup,
		.nth = fuzz_nth,
		.may_open = fuzz_may_open };

	log_set_thread_quiet(true);
	if (size < 4)
		return 0;
	if (hs_client_flags(&hs, get_u32(data)) == HS_CLOSE)
		return 0;
	data += 4;
	size -= 4;
	while (size >= 16 && get_u64(data) == NBD_OPT_MAGIC) {
		uint32_t opt = get_u32(data + 8), len = get_u32(data + 12);
		data += 16;
		size -= 16;
		/* conn.c skips longer options without reading them. */
		if (len > HS_MAX_OPTION_BYTES || len > size)
			break;
		struct buf out;
		buf_init(&out);
		enum hs_action act = hs_option(&hs, opt, data, len, &out);
		data += len;
		size -= len;
		if (act == HS_TRANSMISSION) {
			FUZZ_CHECK(hs.chosen != NULL);
			FUZZ_CHECK(hs.chosen != &fuzz_exports[1]);
			FUZZ_CHECK(hs.chosen_name != NULL);
			FUZZ_CHECK(
			    hs.chosen == fuzz_lookup(NULL, hs.chosen_name));
		} else if (opt != NBD_OPT_EXPORT_NAME) {
			fuzz_check_replies(&out, opt);
		}
		buf_free(&out);
		if (act != HS_CONTINUE)
			break;
	}
	hs_ctx_clear(&hs);
	return 0;
}
