/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * settings-table.c - print the settings table (daemon/base/settings.c) for
 * the docs test, one row a line, tab-separated: GROUP NAME SCOPE RUNTIME
 * DEFAULT UNIT DOC.  SCOPE is "global" or "device", RUNTIME "runtime" or
 * "restart"; DEFAULT is written as wbd.conf(5) writes it (a size with its
 * suffix, a mode in octal), "-" for none.  GROUP is "" for the top level,
 * "exports.journal" for a key of an export's journal group.
 */
#include <stdio.h>

#include "settings.h"
#include "size.h"

static const char *
settings_table_default(const struct setting *s, char *buf, size_t len)
{
	if (s->unset || s->type == SETTING_LIST)
		return "-";
	switch (s->type) {
	case SETTING_STRING:
		return s->def_str != NULL ? s->def_str : "-";
	case SETTING_BOOL:
		return s->def ? "true" : "false";
	case SETTING_ENUM:
		return s->names[s->def];
	case SETTING_MODE:
		snprintf(buf, len, "%04llo", (unsigned long long)s->def);
		return buf;
	case SETTING_BYTES:
		if (s->pair != NULL)
			return "-"; /* the threshold's other form */
				    /* fall through */
	case SETTING_IO_BYTES:
	case SETTING_POW2:
		return size_format(s->def, buf, len);
	default:
		snprintf(buf, len, "%llu", (unsigned long long)s->def);
		return buf;
	}
}

int
main(void)
{
	const struct setting *s;
	char def[32];

	for (s = settings_table; s < settings_table + settings_n; s++)
		printf("%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s->group, s->name,
		    s->scope == SETTING_DEVICE ? "device" : "global",
		    s->runtime ? "runtime" : "restart",
		    settings_table_default(s, def, sizeof def), s->unit,
		    s->doc);
	return 0;
}
