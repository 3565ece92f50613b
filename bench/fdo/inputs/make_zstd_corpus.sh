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
# made every time (seconds), but put in place only when its bytes changed: the files it is
# made of change with the sources or a Debian update, and what is measured from an archive
# is keyed by its content (bench/fdo/fdo.py)
put() {
	if cmp -s "$1" "$2"; then rm -f "$1"; else mv "$1" "$2"; fi
}
"${t[@]}" -cf "$out/zstd_train.tar.new" -C "$work/sqlite-amalg" sqlite3.c shell.c
put "$out/zstd_train.tar.new" "$out/zstd_train.tar"
l=$(cd "$src" && echo lua5.4-*/src)
z=$(cd "$src" && echo libzstd-*)
"${t[@]}" -cf "$out/zstd_eval.tar.new" -C "$src" "$l" "$z/lib" "$z/programs" \
	-C /usr/bin bash -C /usr/lib/x86_64-linux-gnu libc.so.6
put "$out/zstd_eval.tar.new" "$out/zstd_eval.tar"
