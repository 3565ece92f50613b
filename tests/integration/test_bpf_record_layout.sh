#!/usr/bin/env bash
# The shared sample record builds for the BPF target against this kernel's
# BTF, with branch entries laid out like perf_branch_entry.
source "$(dirname "$0")/lib.sh"

if [ ! -r /sys/kernel/btf/vmlinux ]; then
	not_ok "kernel BTF at /sys/kernel/btf/vmlinux"
	finish
fi
bpftool btf dump file /sys/kernel/btf/vmlinux format c >"$TEST_TMP/vmlinux.h"
check "vmlinux.h generated from the kernel's BTF" test -s "$TEST_TMP/vmlinux.h"
check "bpf/edgeprof_record.h compiles for BPF with perf_branch_entry's layout" \
	clang -target bpf -O2 -D__BPF__ -I. -I"$TEST_TMP" -c tests/bpf/record_layout.bpf.c \
	-o "$TEST_TMP/record_layout.o"
finish
