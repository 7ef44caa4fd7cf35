/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backing.c - an export's backing setting to an open backend.
 */
#include "backend.h"
#include "backing.h"
#include "config.h"

struct backend *
backing_open(const struct export_conf *ec, const struct remote_conf *rc)
{
	if (backend_is_uri(ec->backing))
		return backend_nbd_open(ec->backing, ec->size_bytes,
		    ec->readonly, rc);
	return backend_file_open(ec->backing, ec->size_bytes, ec->readonly,
	    ec->direct);
}
