#!/usr/bin/env bash
# Installs the Debian 12 packages edgeprof needs, only those missing, so
# `make run` and `make test` work on a fresh machine. Needs root (or sudo) the
# first time; a machine that has everything installs nothing.
set -euo pipefail

packages=(
	build-essential pkg-config clang clang-format llvm
	libelf-dev zlib1g-dev libcapstone-dev libprotobuf-c-dev protobuf-c-compiler
	libbpf-dev bpftool libzstd-dev
	libcmocka-dev
	linux-perf bolt-16 valgrind python3 jq bc time
)

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing missing packages: ${missing[*]}" >&2
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
