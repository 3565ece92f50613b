// SPDX-License-Identifier: Apache-2.0
// Functions whose names need demangling, and code in no symbol: a C++
// function (Itanium "_Z..."), two functions named as Rust names them (v0
// "_R..." and legacy "_ZN...17h<hash>E", given by asm labels: no Rust
// compiler needed), and strip_me, whose symbol the test strips
// (objcopy --strip-symbol), so its samples fall in no function.
#include <cstdio>
#include <cstdlib>

static volatile unsigned long sink;

namespace ep {
__attribute__((noinline)) unsigned long hot_work(unsigned long n, int salt)
{
	unsigned long s = 0;
	for (unsigned long i = 0; i < n; i++)
		s += (i * 2654435761u) >> 7 ^ (s << 1) ^ (unsigned long)salt;
	return s;
}
} // namespace ep

extern "C" {
unsigned long rust_v0(unsigned long n) __asm__("_RNvCs15kBYyAo9fc_7mycrate7example");
unsigned long rust_legacy(unsigned long n) __asm__("_ZN7mycrate6legacy17h0123456789abcdefE");
unsigned long strip_me(unsigned long n);
}

__attribute__((noinline)) unsigned long rust_v0(unsigned long n)
{
	unsigned long s = 1;
	for (unsigned long i = 0; i < n; i++)
		s = s * 6364136223846793005u + i;
	return s;
}

__attribute__((noinline)) unsigned long rust_legacy(unsigned long n)
{
	unsigned long s = 3;
	for (unsigned long i = 0; i < n; i++)
		s ^= (s >> 3) + i;
	return s;
}

__attribute__((noinline)) unsigned long strip_me(unsigned long n)
{
	unsigned long s = 7;
	for (unsigned long i = 0; i < n; i++)
		s += (s << 2) ^ i;
	return s;
}

int main(int argc, char **argv)
{
	unsigned long rounds = argc > 1 ? strtoul(argv[1], 0, 10) : 100;
	for (unsigned long r = 0; r < rounds; r++)
		/* r in every argument: GCC would call a pure function once */
		sink = ep::hot_work(4000000, (int)r) + rust_v0(2000000 + (r & 1)) +
		       rust_legacy(2000000 + (r & 1)) + strip_me(2000000 + (r & 1));
	std::printf("%lu\n", sink);
	return 0;
}
