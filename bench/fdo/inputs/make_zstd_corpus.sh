#!/bin/bash
# bench/fdo/inputs/make_zstd_corpus.sh SRC_DIR WORK_DIR OUT_DIR: zstd's TRAINING and
# EVALUATION inputs, made from files every run has (no corpus is committed):
#   zstd_train.tar: the sqlite amalgamation (C text, one kind of data);
#   zstd_eval.tar:  the lua and zstd sources plus two Debian 12 binaries (mixed text and
#                   machine code: other match lengths and literal statistics than training).
# tar options make the archives byte-identical from one run to the next.
set -euo pipefail
src=$1 work=$2 out=$3
t=(tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner)
mkdir -p "$out"
[ -s "$out/zstd_train.tar" ] ||
	"${t[@]}" -cf "$out/zstd_train.tar" -C "$work/sqlite-amalg" sqlite3.c shell.c
if [ ! -s "$out/zstd_eval.tar" ]; then
	l=$(cd "$src" && echo lua5.4-*/src)
	z=$(cd "$src" && echo libzstd-*)
	"${t[@]}" -cf "$out/zstd_eval.tar" -C "$src" "$l" "$z/lib" "$z/programs" \
		-C /usr/bin bash -C /usr/lib/x86_64-linux-gnu libc.so.6
fi
