/* SPDX-License-Identifier: Apache-2.0 */
/* The shared library dlopen_spin loads late (built with -shared -fPIC). */
__attribute__((noinline)) unsigned long lib_spin(unsigned long n)
{
	unsigned long s = 0;
	for (unsigned long i = 0; i < n; i++)
		s += (i * 2654435761u) >> 5 ^ (s << 1);
	return s;
}
