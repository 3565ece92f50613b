/* SPDX-License-Identifier: Apache-2.0 */
/* A state machine scanning generated text for words and numbers: a switch
 * on the state nested with character-class branches. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000000;
	enum { SPACE, WORD, NUMBER } state = SPACE;
	long words = 0, numbers = 0;
	unsigned seed = 12345;
	for (long i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		unsigned r = (seed >> 16) % 16;
		char ch = r < 9 ? (char)('a' + r) : r < 13 ? (char)('0' + r - 9) : ' ';
		switch (state) {
		case SPACE:
			if (ch >= 'a' && ch <= 'z') {
				state = WORD;
				words++;
			} else if (ch >= '0' && ch <= '9') {
				state = NUMBER;
				numbers++;
			}
			break;
		case WORD:
			if (ch == ' ')
				state = SPACE;
			break;
		case NUMBER:
			if (ch == ' ')
				state = SPACE;
			else if (ch >= 'a' && ch <= 'z')
				state = WORD;
			break;
		}
	}
	printf("%ld %ld\n", words, numbers);
	return 0;
}
