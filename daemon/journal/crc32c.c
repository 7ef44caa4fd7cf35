/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * crc32c.c - CRC-32C (Castagnoli, the polynomial iSCSI, ext4 and btrfs
 * use), reflected, as crc32c.h says: the SSE 4.2 instruction where the CPU
 * has it, else slicing by 8 over tables made once.
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "crc32c.h"

#define CRC32C_POLY 0x82f63b78u /* reflected 0x1edc6f41 */

static uint32_t crc32c_table[8][256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;
static bool crc32c_hw;

static void
crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc32c_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc32c_table[t][i] = (crc32c_table[t - 1][i] >> 8) ^
			    crc32c_table[0][crc32c_table[t - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc32c_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t
crc32c_soft(uint32_t c, const unsigned char *p, size_t n)
{
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		w ^= c; /* little-endian: the low bytes first */
		c = crc32c_table[7][w & 0xff] ^
		    crc32c_table[6][(w >> 8) & 0xff] ^
		    crc32c_table[5][(w >> 16) & 0xff] ^
		    crc32c_table[4][(w >> 24) & 0xff] ^
		    crc32c_table[3][(w >> 32) & 0xff] ^
		    crc32c_table[2][(w >> 40) & 0xff] ^
		    crc32c_table[1][(w >> 48) & 0xff] ^
		    crc32c_table[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = (c >> 8) ^ crc32c_table[0][(c ^ *p++) & 0xff];
	return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
crc32c_sse42(uint32_t c, const unsigned char *p, size_t n)
{
	uint64_t c64 = c;

	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c64 = __builtin_ia32_crc32di(c64, w);
		p += 8;
		n -= 8;
	}
	c = (uint32_t)c64;
	while (n--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}
#endif

uint32_t
crc32c_update(uint32_t crc, const void *buf, size_t len)
{
	uint32_t c = ~crc;

	pthread_once(&crc32c_once, crc32c_init);
#if defined(__x86_64__)
	if (crc32c_hw)
		return ~crc32c_sse42(c, buf, len);
#endif
	return ~crc32c_soft(c, buf, len);
}

uint32_t
crc32c_update_soft(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc32c_once, crc32c_init);
	return ~crc32c_soft(~crc, buf, len);
}
