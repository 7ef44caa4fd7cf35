/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * settings-table.c - print the settings table (daemon/base/settings.c) for
 * the docs test, one row a line: "NAME SCOPE RUNTIME UNIT", SCOPE "global" or
 * "device", RUNTIME "runtime" or "restart".
 */
#include <stdio.h>

#include "settings.h"

int
main(void)
{
	const struct setting *s;

	for (s = settings_table; s < settings_table + settings_n; s++)
		printf("%s %s %s %s\n", s->name,
		    s->scope == SETTING_DEVICE ? "device" : "global",
		    s->runtime ? "runtime" : "restart", s->unit);
	return 0;
}
