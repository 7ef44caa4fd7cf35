/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * privs.c - giving up root once at start-up: see privs.h.
 *
 * Main thread, once, before serving.  Any thread already started (a
 * remote's connection attempt) changes with it: glibc applies set*id to
 * every thread of the process.  Changing the uid of every id (real,
 * effective, saved) from 0 to another clears every capability, permitted
 * and effective; wbd then checks that root cannot be had back.
 */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "log.h"
#include "privs.h"

static bool
privs_already(uid_t uid, gid_t gid)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	getresuid(&ru, &eu, &su);
	getresgid(&rg, &eg, &sg);
	return ru == uid && eu == uid && su == uid && rg == gid && eg == gid &&
	    sg == gid;
}

/* The highest capability this kernel knows (63 if it does not say). */
static int
privs_last_cap(void)
{
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "r");
	int last = 63;

	if (f) {
		if (fscanf(f, "%d", &last) != 1 || last < 0 || last > 63)
			last = 63;
		fclose(f);
	}
	return last;
}

void
privs_harden(const struct run_as_conf *ra)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		log_warn("cannot set no_new_privs");
	if (!ra->user || geteuid() != 0)
		return;
	int last = privs_last_cap(), dropped = 0;
	for (int cap = 0; cap <= last; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) {
			dropped++;
		} else if (errno == EPERM) {
			/* No CAP_SETPCAP: whoever started wbd (a unit's
			 * CapabilityBoundingSet=) chose the set. */
			log_debug("the capability bounding set is left as "
				  "wbd found it (no CAP_SETPCAP)");
			return;
		} else if (errno != EINVAL) {
			log_warn("cannot empty the capability bounding set "
				 "(capability %d)",
			    cap);
			return;
		}
	}
	log_debug("no_new_privs set; %d capabilities dropped from the "
		  "bounding set",
	    dropped);
}

int
privs_drop(const struct run_as_conf *ra)
{
	uid_t uid = (uid_t)ra->uid;
	gid_t gid = (gid_t)ra->gid;
	const char *group = ra->group ? ra->group : "(the user's group)";

	if (!ra->user)
		return 0;
	if (privs_already(uid, gid)) {
		log_info("running as user %s (uid %u), gid %u, as configured",
		    ra->user, (unsigned)uid, (unsigned)gid);
		return 0;
	}
	if (geteuid() != 0) {
		log_warnx(
		    "user = \"%s\": wbd runs as uid %u, not root, and "
		    "cannot change to uid %u gid %u: start it as root (it "
		    "changes after opening its sockets and backings) or as "
		    "that user and group, or remove user and group from the "
		    "configuration",
		    ra->user, (unsigned)geteuid(), (unsigned)uid,
		    (unsigned)gid);
		return -1;
	}
	if (initgroups(ra->user, gid) < 0) {
		log_warn("user = \"%s\": cannot take its supplementary groups",
		    ra->user);
		return -1;
	}
	if (setresgid(gid, gid, gid) < 0) {
		log_warn("group %s: cannot change to gid %u", group,
		    (unsigned)gid);
		return -1;
	}
	if (setresuid(uid, uid, uid) < 0) {
		log_warn("user = \"%s\": cannot change to uid %u", ra->user,
		    (unsigned)uid);
		return -1;
	}
	if (uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)) {
		log_warnx("user = \"%s\": root could be had back after "
			  "changing to uid %u; refusing to serve",
		    ra->user, (unsigned)uid);
		return -1;
	}
	int n = getgroups(0, NULL);
	log_info("now running as user %s (uid %u), group %s (gid %u), with "
		 "%d supplementary group%s",
	    ra->user, (unsigned)uid, ra->group ? ra->group : "of the user",
	    (unsigned)gid, n, n == 1 ? "" : "s");
	return 0;
}
