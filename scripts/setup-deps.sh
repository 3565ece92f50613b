#!/usr/bin/env bash
# Installs the Debian 12 packages edgeprof needs, only those missing, so
# `make run` and `make test` work on a fresh machine. Needs root (or sudo) the
# first time; a machine that has everything installs nothing.
set -euo pipefail

# build: compiler, libelf, capstone, protobuf-c; BPF: clang, libbpf, bpftool;
# tests: cmocka, and the oracles perf (linux-perf), BOLT 16, objdump/readelf
# (binutils), callgrind (valgrind), create_llvm_prof (autofdo: reads the
# emulator's perf.data), llvm-profgen-14 (llvm-14: the AutoFDO route that
# works, test_autofdo; clang pulls clang-14 but only recommends llvm-14);
# the LBR emulator runs programs under
# qemu-user; scripts: python3, jq, bc, GNU time; streaming: zstd, libcurl,
# libmicrohttpd (+ GnuTLS for its TLS), SQLite; tests: clickhouse-server,
# openssl (test certificates), iproute2 (network namespaces), curl; deploy:
# podman + runc (the agent image run as the DaemonSet would), python3-yaml;
# pod names: json-c parses the Kubernetes API server's pod list; `make bench-fdo`:
# tcl (sqlite's source package puts its amalgamation together with tclsh);
# the collector's web UI: libgraphviz-dev (its CFGs are laid out with Graphviz's
# libgvc, in the collector), chromium (the UI's tests load every view in a
# headless browser) and fonts-dejavu-core (the fonts the pages and screenshots use);
# libdebuginfod-dev (the collector fetches code it was not sent from debuginfod
# servers) and debuginfod (the server its test runs on loopback); libiberty-dev
# (the UI demangles C++ and Rust names with binutils' own demangler);
# aarch64 (issue 15): binutils-aarch64-linux-gnu (objdump, the decoder's oracle on
# arm64 code), gcc-aarch64-linux-gnu and libc6-dev-arm64-cross (the workloads
# cross-compiled, static or with the arm64 libc), and libzstd1:arm64 (Debian's own
# arm64 build of a real library, with libc6:arm64 under it, for the oracle: it needs
# the arm64 architecture added to dpkg, which only adds package lists);
# golang-go: `go tool pprof`, the reader test_pprof.sh checks the pprof export with
packages=(
	build-essential pkg-config binutils clang clang-format
	libelf-dev zlib1g-dev libcapstone-dev libprotobuf-c-dev protobuf-c-compiler
	libbpf-dev bpftool libzstd-dev
	libcurl4-openssl-dev libmicrohttpd-dev libgnutls28-dev libsqlite3-dev
	libjson-c-dev libcmocka-dev
	linux-perf bolt-16 autofdo llvm-14 valgrind qemu-user python3 jq bc time
	clickhouse-server openssl iproute2 curl zstd python3-yaml podman runc
	tcl libgraphviz-dev chromium fonts-dejavu-core libdebuginfod-dev debuginfod
	libiberty-dev
	binutils-aarch64-linux-gnu gcc-aarch64-linux-gnu libc6-dev-arm64-cross libzstd1:arm64
	golang-go
)

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing missing packages: ${missing[*]}" >&2
# Another apt or dpkg (unattended-upgrades, a second terminal) may hold the
# package locks: wait for it, saying so once, rather than fail. apt-get
# install waits by itself with DPkg::Lock::Timeout; update does not honour
# that option for its lists lock, so it is tried again while it says "lock".
lock_wait_s=${SETUP_LOCK_WAIT_S:-900}
apt_locked() { # CMD... : runs CMD, again while it fails on a held lock
	local start=$SECONDS said=0 log
	log=$(mktemp)
	while ! "$@" 2>"$log"; do
		if ! grep -q 'Could not get lock\|Unable to lock\|Unable to acquire\|frontend lock' "$log" ||
			((SECONDS - start >= lock_wait_s)); then
			cat "$log" >&2
			rm -f "$log"
			return 1
		fi
		if [ "$said" = 0 ]; then
			echo "setup: waiting for the package lock ($(head -1 "$log"))" >&2
			said=1
		fi
		sleep 2
	done
	rm -f "$log"
}
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
# the :arm64 packages need dpkg to know the architecture before the update
if [[ " ${missing[*]}" == *:arm64* ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
	apt_locked "${sudo_cmd[@]}" dpkg --add-architecture arm64
fi
apt_locked "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout="$lock_wait_s" update -qq
apt_locked "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout="$lock_wait_s" install -y -qq \
	--no-install-recommends "${missing[@]}" >/dev/null
