/* SPDX-License-Identifier: Apache-2.0 */
/* Names for people: C++ (Itanium "_Z...") and Rust (v0 "_R...", legacy)
 * symbols demangled by libiberty, the demangler of binutils and GCC. Only
 * for display: profiles and exports keep the raw names BOLT and AutoFDO
 * match on. */
#ifndef EP_DEMANGLE_H
#define EP_DEMANGLE_H

#include <stddef.h>

/* name demangled into buf (cut to len), a suffix "@PLT" or "@@VERSION"
 * kept after it; name itself (not copied) when it is not a mangled name
 * or does not demangle. */
const char *ep_demangle(const char *name, char *buf, size_t len);

#endif
