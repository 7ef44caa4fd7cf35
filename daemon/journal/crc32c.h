/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * crc32c.h - CRC-32C, the checksum of the write log's records and
 * superblock: crc32c_update(0, "123456789", 9) == 0xe3069283.  Chained:
 * crc32c_update(crc32c_update(0, a, n), b, m) is the CRC of a then b.
 * Any thread.
 */
#ifndef WBD_CRC32C_H
#define WBD_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t crc32c_update(uint32_t crc, const void *buf, size_t len);
/* The table-driven path alone (the unit test holds it to the other). */
uint32_t crc32c_update_soft(uint32_t crc, const void *buf, size_t len);

#endif
