#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Hostile ELF files of issue 32, for test_hostile_elf.sh.

  hostile_elf.py segments OUT   item 1: 4 MiB, 1,000 executable PT_LOADs
                                each covering the whole file
  hostile_elf.py symbols OUT    item 2: 60,000 function symbols all naming
                                one 16 KB string (a 1.4 MiB file; the
                                issue's 20 KB is past the name bound);
                                symbols-N: the same without a build-id (the
                                agent reads it, and sends it nowhere)
  hostile_elf.py sections OUT   1,000,000 section headers (64 MB, under the
                                collector's default --max-binary-mib): libelf's
                                own bookkeeping for them is ~4x that

Each is an x86-64 ET_DYN with a GNU build-id note (so the agent uploads it
and the collector files it) and, at file offset 0x1000, `jmp .`: a process
that maps the file executable and calls there spins in it
(tests/workloads/map_spin.c). Prints that offset and the build-id.
"""
import hashlib
import struct
import sys

CODE_OFF = 0x1000
SPIN = b"\xeb\xfe"  # jmp .

PT_LOAD, PT_NOTE = 1, 4
PF_X, PF_R = 1, 4
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB = 1, 2, 3
SHF_ALLOC, SHF_EXECINSTR = 2, 4


def ehdr(phnum, shoff, shnum, shstrndx, phoff=64):
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    return ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, CODE_OFF, phoff, shoff, 0, 64, 56,
                               phnum, 64, shnum, shstrndx)


def phdr(ptype, flags, off, vaddr, size):
    align = 4 if ptype == PT_NOTE else 0x1000
    return struct.pack("<IIQQQQQQ", ptype, flags, off, vaddr, vaddr, size, size, align)


def shdr(name, stype, flags, addr, off, size, link=0, info=0, align=1, entsize=0):
    return struct.pack("<IIQQQQIIQQ", name, stype, flags, addr, off, size, link, info, align,
                       entsize)


def build_id(kind):
    return hashlib.sha1(("edgeprof hostile " + kind).encode()).digest()


def note(kind, ntype=3):
    bid = build_id(kind)
    return struct.pack("<III", 4, len(bid), ntype) + b"GNU\0" + bid


def segments(out):
    """Item 1: every executable segment is the whole file, 1,000 times."""
    size, nload = 4 << 20, 1000
    n = note("segments")
    phoff = 2 * CODE_OFF
    note_off = phoff + 56 * (nload + 1)
    hdrs = phdr(PT_NOTE, PF_R, note_off, note_off, len(n)) + b"".join(
        phdr(PT_LOAD, PF_R | PF_X, 0, i * size, size) for i in range(nload))
    buf = bytearray(size)
    head = ehdr(nload + 1, 0, 0, 0, phoff)
    buf[:len(head)] = head
    buf[phoff:phoff + len(hdrs)] = hdrs
    buf[note_off:note_off + len(n)] = n
    buf[CODE_OFF:CODE_OFF + len(SPIN)] = SPIN
    return bytes(buf)


def symbols(out, kind="symbols"):
    """Item 2: 60,000 symbols, one 16 KB name (within EP_ELF_MAX_SYMBOL_NAME)."""
    nsym, name_len = 60000, 16000
    # NT_GNU_BUILD_ID for item 2's file, another note type for the others
    n = note(kind, 3 if kind == "symbols" else 1)
    note_off = 64 + 56 * 2
    text_size = 0x10000
    strtab = b"\0" + b"f" * name_len + b"\0"
    shstrtab = b"\0.text\0.symtab\0.strtab\0.shstrtab\0"
    sym_off = CODE_OFF + text_size
    # global functions in .text (section 1), each one byte
    syms = b"\0" * 24 + b"".join(
        struct.pack("<IBBHQQ", 1, 0x12, 0, 1, CODE_OFF + i % text_size, 1)
        for i in range(1, nsym))
    str_off = sym_off + len(syms)
    shstr_off = str_off + len(strtab)
    sh_off = (shstr_off + len(shstrtab) + 7) & ~7
    sections = (shdr(0, 0, 0, 0, 0, 0) +
                shdr(1, SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, CODE_OFF, CODE_OFF, text_size,
                     align=16) +
                shdr(7, SHT_SYMTAB, 0, 0, sym_off, len(syms), link=3, info=1, align=8,
                     entsize=24) +
                shdr(15, SHT_STRTAB, 0, 0, str_off, len(strtab)) +
                shdr(23, SHT_STRTAB, 0, 0, shstr_off, len(shstrtab)))
    load_size = CODE_OFF + text_size
    head = (ehdr(2, sh_off, 5, 4) + phdr(PT_NOTE, PF_R, note_off, note_off, len(n)) +
            phdr(PT_LOAD, PF_R | PF_X, 0, 0, load_size))
    buf = bytearray(sh_off + len(sections))
    buf[:len(head)] = head
    buf[note_off:note_off + len(n)] = n
    buf[CODE_OFF:CODE_OFF + len(SPIN)] = SPIN
    buf[sym_off:sym_off + len(syms)] = syms
    buf[str_off:str_off + len(strtab)] = strtab
    buf[shstr_off:shstr_off + len(shstrtab)] = shstrtab
    buf[sh_off:] = sections
    return bytes(buf)


def sections(out):
    """1,000,000 section headers: libelf keeps ~260 bytes of its own per header."""
    nsec = 1000000
    n = note("sections")
    note_off = 64 + 56 * 2
    load_size = CODE_OFF + 0x1000
    sh_off = load_size
    # more than e_shnum can say: section 0's sh_size holds the count
    head = (ehdr(2, sh_off, 0, 0) + phdr(PT_NOTE, PF_R, note_off, note_off, len(n)) +
            phdr(PT_LOAD, PF_R | PF_X, 0, 0, load_size))
    buf = bytearray(sh_off)
    buf[:len(head)] = head
    buf[note_off:note_off + len(n)] = n
    buf[CODE_OFF:CODE_OFF + len(SPIN)] = SPIN
    empty = shdr(0, SHT_PROGBITS, 0, 0, 0, 0)
    return bytes(buf) + shdr(0, 0, 0, 0, 0, nsec) + empty * (nsec - 1)


def main():
    kinds = {"segments": segments, "symbols": symbols, "sections": sections}
    kind = sys.argv[1] if len(sys.argv) == 3 else ""
    base = kind.split("-")[0]
    if base not in kinds:
        sys.exit("usage: hostile_elf.py segments|symbols[-N]|sections OUT")
    data = kinds[base](sys.argv[2], kind) if base == "symbols" else kinds[base](sys.argv[2])
    with open(sys.argv[2], "wb") as f:
        f.write(data)
    print(hex(CODE_OFF), build_id(sys.argv[1]).hex())


if __name__ == "__main__":
    main()
