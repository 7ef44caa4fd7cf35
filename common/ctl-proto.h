/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl-proto.h - what wbd and wbctl must agree on about the control socket:
 * the protocol version and the default socket path.  The protocol itself
 * is docs/control-protocol.md.  No state.
 */
#ifndef WBD_CTL_PROTO_H
#define WBD_CTL_PROTO_H

/* The "v" of every request and answer. */
#define CTL_PROTOCOL_VERSION    1

/* control.socket when the configuration does not set it, and wbctl's -s
 * when neither it nor WBD_CONTROL_SOCKET is given. */
#define WBD_DEFAULT_CONTROL     "/run/wbd/control.sock"

#endif
