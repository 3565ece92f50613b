/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A binary's BOLT address translation table (common/elf/elf_bat.h), read
 * only when an export asks for it: the agent never needs it, and a BOLTed
 * binary's table costs memory per basic block. The file is opened again
 * and read only if it is the one opened then, within the tables bound
 * (and what the binaries held leave), charged like the rest of its tables.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/resolve/binary_internal.h"
#include "common/util/regular_file.h"

static bool fd_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	return ep_pread_full(*(int *)ctx, buf, len, off) == len;
}

static bool same_file(const struct ep_binary *b, int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && st.st_dev == b->dev && st.st_ino == b->ino &&
	       st.st_size == b->size && st.st_mtim.tv_sec == b->mtime.tv_sec &&
	       st.st_mtim.tv_nsec == b->mtime.tv_nsec;
}

/* 1 read, 0 none, -1 refused (why). */
static int read_bat(struct ep_binary *b, struct ep_bat *bat, char *why, size_t len)
{
	int fd = ep_open_regular(b->path, why, len);
	if (fd < 0)
		return -1;
	int rc = -1;
	Elf *elf = NULL;
	struct ep_elf_limits lim = b->reg->limits;
	uint64_t room = ep_binreg_room(b->reg);
	if (room < lim.table_bytes) {
		lim.table_bytes = room;
		lim.table_knob = HELD_KNOB;
	}
	struct ep_elf_budget budget;
	ep_elf_budget_init(&budget, &lim);
	if (!same_file(b, fd))
		snprintf(why, len, "the file changed since it was read");
	else if (ep_elf_check_headers(fd_read, &fd, (uint64_t)b->size, &budget, why, len) == 0 &&
		 (elf = elf_begin(fd, ELF_C_READ, NULL)) != NULL)
		rc = ep_elf_bat_read(elf, &budget, bat, why, len);
	else if (!why[0])
		snprintf(why, len, "not an ELF file");
	if (elf)
		elf_end(elf);
	ep_elf_budget_release(&budget);
	close(fd);
	return rc;
}

const struct ep_bat *ep_binary_bat(struct ep_binary *b, bool *refused)
{
	*refused = b->bat_refused;
	if (b->bat_read)
		return b->bat;
	b->bat_read = true;
	struct ep_bat bat;
	char why[256] = "";
	int rc = read_bat(b, &bat, why, sizeof(why));
	if (rc > 0 && (b->bat = malloc(sizeof(*b->bat))) != NULL) {
		*b->bat = bat;
		b->reg->held_bytes += bat.bytes;
		return b->bat;
	}
	if (rc > 0) {
		ep_bat_free(&bat);
		snprintf(why, sizeof(why), "out of memory");
	}
	if (rc != 0) {
		*refused = b->bat_refused = true;
		/* named as its process or recording names it, and the file read */
		const char *name = ep_binary_recorded_path(b);
		char msg[2 * PATH_MAX + 320];
		if ((strcmp(name, b->path) != 0
			 ? snprintf(msg, sizeof(msg),
				    "%s (%s): BOLT address translation not read: %s", name, b->path,
				    why)
			 : snprintf(msg, sizeof(msg), "%s: BOLT address translation not read: %s",
				    name, why)) < 0)
			msg[0] = '\0';
		ep_binreg_note_limited(b->reg, msg, false);
	}
	return NULL;
}
