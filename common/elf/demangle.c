/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libiberty's cplus_demangle (Debian's libiberty-dev, a static archive)
 * rather than a demangler of our own: the Itanium and Rust v0 grammars are
 * large and still grow, and this is the code c++filt, gdb and perf use, so
 * the UI names functions as those tools do. Its demangler files carry the
 * linking exception to the LGPL.
 */
#include "common/elf/demangle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

/* Mangled names are bounded by the symbol's length (wire.c keeps them
 * short); a longer one is shown raw rather than copied to the heap. */
#define MAX_MANGLED 4096

const char *ep_demangle(const char *name, char *buf, size_t len)
{
	if (!name || !len || (strncmp(name, "_Z", 2) != 0 && strncmp(name, "_R", 2) != 0))
		return name;
	char mangled[MAX_MANGLED];
	size_t stem = strcspn(name, "@");
	if (stem >= sizeof(mangled))
		return name;
	memcpy(mangled, name, stem);
	mangled[stem] = '\0';
	/* DMGL_PARAMS: the argument types, which tell overloads apart;
	 * the style is libiberty's default, auto (Itanium, Rust) */
	char *d = cplus_demangle(mangled, DMGL_PARAMS | DMGL_ANSI);
	if (!d)
		return name;
	snprintf(buf, len, "%s%s", d, name + stem);
	free(d);
	return buf;
}
