/*
 * Every AArch64 branch form, and data placed in code, for the decoder's
 * objdump oracle (tests/unit/test_decoder_arm64.c). Assembled and linked,
 * never run. Each function is a place a walk starts (a function start), and
 * ends with the form it is named for; the data sits where hand-written code
 * puts it (literal pools after a return, a table between functions) and
 * holds words that decode as branches, so reading it as code would show.
 */
	.arch	armv8.5-a
	.text

	.macro	fn name
	.globl	\name
	.type	\name, %function
	.p2align 2
\name:
	.endm

fn	_start
	bl	conds
	b	_start

/* every conditional form, passed one after the other when not taken */
fn	conds
	paciasp
	bti	c
	cmp	x0, #1
	b.eq	1f
	b.ne	1f
	b.cs	1f
	b.cc	1f
	b.mi	1f
	b.pl	1f
	b.vs	1f
	b.vc	1f
	b.hi	1f
	b.ls	1f
	b.ge	1f
	b.lt	1f
	b.gt	1f
	b.le	1f
	cbz	w0, 1f
	cbz	x0, conds
	cbnz	w1, 1f
	cbnz	x1, conds
	tbz	w2, #3, 1f
	tbz	x2, #63, conds
	tbnz	w3, #0, 1f
	tbnz	x3, #40, conds
	svc	#0
	nop
1:	autiasp
	ret

/* always-true conditions are jumps */
fn	cond_always
	b.al	cond_never
fn	cond_never
	b.nv	cond_always

fn	jump
	b	conds
fn	call
	bl	conds
fn	ret_x30
	ret
fn	ret_reg
	ret	x3
fn	ret_aa
	paciasp
	retaa
fn	ret_ab
	pacibsp
	retab
fn	br_plain
	br	x16
fn	br_aaz
	braaz	x3
fn	br_abz
	brabz	x4
fn	br_aa
	braa	x1, x2
fn	br_ab
	brab	x1, sp
fn	blr_plain
	blr	x9
fn	blr_aaz
	blraaz	x7
fn	blr_abz
	blrabz	x10
fn	blr_aa
	blraa	x5, x6
fn	blr_ab
	blrab	x8, x9
fn	trap_brk
	brk	#0x3e8
fn	trap_hlt
	hlt	#2
fn	trap_udf
	udf	#0
fn	exc_eret
	eret
fn	exc_eretaa
	eretaa
fn	exc_eretab
	eretab
fn	exc_drps
	drps

/* a literal pool after the return: two of its words read as b and bl */
fn	literals
	ldr	x0, =0x123456789abcdef0
	ldr	w1, =0x14000010
	ldr	w2, =0x94000004
	cbz	x0, 1f
	add	x0, x0, x1
1:	ret
	.ltorg

/* a table between functions: words that read as b.eq, ret, br x16 */
	.p2align 2
table:
	.word	0x54000040, 0xd65f03c0, 0xd61f0200
	.byte	1, 2, 3
	.p2align 2

/* code that runs into data: a walk must stop where the data starts, not
 * read its ret */
fn	into_data
	cmp	x0, #0
	b.ne	into_data
	nop
	.word	0xd65f03c0
	nop
	ret
