/* SPDX-License-Identifier: Apache-2.0 */
#include "common/elf/elf_note.h"

#include <string.h>

static bool note_build_id(Elf_Data *data, uint8_t *out, size_t *len)
{
	size_t off = 0, name_off, desc_off;
	GElf_Nhdr nhdr;
	while ((off = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
		if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == 4 &&
		    memcmp((const char *)data->d_buf + name_off, "GNU", 4) == 0 &&
		    nhdr.n_descsz > 0 && nhdr.n_descsz <= EP_ELF_BUILD_ID_MAX) {
			memcpy(out, (const uint8_t *)data->d_buf + desc_off, nhdr.n_descsz);
			*len = nhdr.n_descsz;
			return true;
		}
	}
	return false;
}

bool ep_elf_build_id(Elf *elf, size_t nphdr, uint64_t file_len, struct ep_elf_budget *budget,
		     uint8_t out[EP_ELF_BUILD_ID_MAX], size_t *len)
{
	for (size_t i = 0; i < nphdr; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE ||
		    ph.p_offset > file_len || ph.p_filesz > file_len - ph.p_offset)
			continue;
		Elf_Data *d = ep_elf_rawchunk(budget, elf, ph.p_offset, ph.p_filesz, ELF_T_NHDR);
		if (d && note_build_id(d, out, len))
			return true;
	}
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		Elf_Data *d = ep_elf_section_data(budget, elf, scn);
		if (d && note_build_id(d, out, len))
			return true;
	}
	return false;
}

void ep_build_id_to_hex(const uint8_t *id, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[id[i] >> 4];
		out[2 * i + 1] = digits[id[i] & 15];
	}
	out[2 * len] = '\0';
}
