/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz-nbd-replies.c - what a remote NBD server sends back to wbd's own
 * reads (nbdread.c): the input's first byte gives the number of READs in
 * flight (1 + its low 2 bits), the next bytes one each their length
 * ((byte + 1) * 256 bytes); the rest is the server's reply stream, after
 * which the server hangs up.  The cookies of READs 0, 1, 2, 3 are
 * 0x00000001_00000000, 0x00000002_00000001, ... (sequence, slot).
 *
 * Beyond not crashing: once the stream has ended every READ is done; one
 * done without error holds exactly the bytes asked for; one done with an
 * error has an errno the spec allows, or ENOTCONN from a failed
 * connection (then nbdread_failed says why).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "nbdread.h"

#define MAX_READS 4
#define MAX_STREAM (128u << 10)

static bool
allowed_errno(int e)
{
	switch (e) {
	case EPERM:
	case EIO:
	case ENOMEM:
	case EINVAL:
	case ENOSPC:
	case EOVERFLOW:
	case ENOTSUP:
	case ESHUTDOWN:
	case ENOTCONN:
		return true;
	default:
		return false;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nbdread_req req[MAX_READS];
	uint8_t *buf[MAX_READS] = { NULL };
	int fd[2];

	if (size < 1)
		return 0;
	unsigned n = 1 + (data[0] & 3);
	if (size < 1 + n)
		return 0;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, fd) != 0)
		return 0;
	struct nbdread *nr = nbdread_new(fd[0]);
	FUZZ_CHECK(nr != NULL);
	for (unsigned i = 0; i < n; i++) {
		uint32_t count = (data[1 + i] + 1u) * 256u;
		buf[i] = malloc(count);
		FUZZ_CHECK(buf[i] != NULL);
		req[i] = (struct nbdread_req){ .buf = buf[i],
			.count = count,
			.off = (uint64_t)i << 20 };
		FUZZ_CHECK(nbdread_submit(nr, &req[i]) == 0);
	}
	/* Send the requests, then play the server: its stream, the end. */
	(void)nbdread_wait(nr, &req[0], 0, -1);
	const uint8_t *stream = data + 1 + n;
	size_t len = size - 1 - n;
	if (len > MAX_STREAM)
		len = MAX_STREAM;
	while (len > 0) {
		ssize_t w = write(fd[1], stream, len);
		if (w <= 0)
			break;
		stream += w;
		len -= (size_t)w;
	}
	shutdown(fd[1], SHUT_WR);
	for (unsigned i = 0; i < n; i++) {
		FUZZ_CHECK(nbdread_wait(nr, &req[i], 10000, -1));
		FUZZ_CHECK(req[i].done);
		if (req[i].error == 0)
			FUZZ_CHECK(req[i].got == req[i].count);
		else
			FUZZ_CHECK(allowed_errno(req[i].error));
		if (req[i].error == ENOTCONN)
			FUZZ_CHECK(nbdread_failed(nr) != NULL);
	}
	nbdread_free(nr);
	for (unsigned i = 0; i < n; i++)
		free(buf[i]);
	close(fd[0]);
	close(fd[1]);
	return 0;
}
