/* SPDX-License-Identifier: Apache-2.0 */
/* map_spin FILE OFFSET: maps FILE executable and calls the code at OFFSET,
 * which is expected never to return (a `jmp .`): a process whose samples
 * all fall in a file of the test's making, however odd its ELF headers
 * (tests/integration/test_hostile_elf.sh). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: map_spin FILE OFFSET\n");
		return 2;
	}
	int fd = open(argv[1], O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		perror(argv[1]);
		return 1;
	}
	unsigned long off = strtoul(argv[2], NULL, 0);
	if (off >= (unsigned long)st.st_size) {
		fprintf(stderr, "%s: offset past the end\n", argv[1]);
		return 1;
	}
	uint8_t *base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	if (base == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	close(fd);
	((void (*)(void))(base + off))();
	return 0;
}
