/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backing.h - choosing a backend for an export's "backing" setting.
 * Main thread (start-up, reload) or a pending export's attempt thread.
 */
#ifndef WBD_BACKING_H
#define WBD_BACKING_H

struct backend;
struct export_conf;
struct remote_conf;

/*
 * Open export EC's backing device: an NBD URI ("nbd://", "nbds://",
 * "nbd+unix://", "nbds+unix://") through backend_nbd_open, anything else
 * as a local file or block device through backend_file_open.  NULL with
 * errno set, after logging why.
 */
struct backend *backing_open(const struct export_conf *ec,
    const struct remote_conf *rc);

#endif
