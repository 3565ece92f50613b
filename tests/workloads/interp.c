/* SPDX-License-Identifier: Apache-2.0 */
/* A bytecode interpreter: one indirect jump (a switch through a table)
 * dispatching to handlers, the branch pattern of every VM. */
#include <stdio.h>
#include <stdlib.h>

enum op { PUSH, ADD, SUB, DUP, JNZ, POP, HALT };

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	/* do { counter -= 1; acc += counter } while (counter) */
	static const int code[] = {PUSH, 1, SUB, DUP, DUP, ADD, POP, DUP, JNZ, 0, POP, HALT};
	long stack[16], acc = 0;
	int sp = 0, pc = 0;
	stack[sp++] = n;
	for (;;) {
		switch (code[pc]) {
		case PUSH:
			stack[sp++] = code[pc + 1];
			pc += 2;
			break;
		case ADD:
			sp--;
			stack[sp - 1] += stack[sp];
			acc += stack[sp - 1];
			pc++;
			break;
		case SUB:
			sp--;
			stack[sp - 1] -= stack[sp];
			pc++;
			break;
		case DUP:
			stack[sp] = stack[sp - 1];
			sp++;
			pc++;
			break;
		case JNZ:
			pc = stack[--sp] ? code[pc + 1] : pc + 2;
			break;
		case POP:
			sp--;
			pc++;
			break;
		case HALT:
			printf("%ld %d\n", acc, sp);
			return 0;
		}
	}
}
