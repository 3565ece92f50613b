#!/usr/bin/env bash
# check_layers.sh DIR: each top folder's library in DIR (libcommon.a, libagent.a,
# libcollector.a, libcli.a) linked whole into a program with only the layers below it,
# so the linker refuses any call the wrong way: common into anything, agent into
# collector or cli, collector into agent or cli. (An ordered link of the whole program
# refuses such a call only when nothing else pulled the callee in.) $CC and $LDLIBS as
# the Makefile links; prints the linker's complaint and exits 1 on a wrong-way call.
set -u
dir=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo 'int main(void) { return 0; }' >"$tmp/main.c"
rc=0
layer() { # LIB BELOW...: LIB whole, with the libraries BELOW it
	local lib=$1
	shift
	# shellcheck disable=SC2086 # LDLIBS is a list of words
	if ! out=$(${CC:-cc} -o "$tmp/layer" "$tmp/main.c" -Wl,--whole-archive "$dir/$lib" \
		-Wl,--no-whole-archive "${@/#/$dir/}" ${LDLIBS:-} 2>&1); then
		echo "$dir/$lib calls outside the layers below it (${*:-none}):"
		grep -o "undefined reference to .*" <<<"$out" | sort -u | sed 's/^/  /'
		rc=1
	fi
}
layer libcommon.a
layer libagent.a libcommon.a
layer libcollector.a libcommon.a
layer libcli.a libagent.a libcollector.a libcommon.a
exit $rc
