#!/usr/bin/env bash
# Builds the edgeprof container image from this checkout's build, pulling
# nothing from any registry: a root filesystem "from scratch" holding
# build/edgeprof, the shared libraries it links (copied from this Debian 12
# build host, so the versions are the ones it was built and tested with),
# the dynamic loader, and empty directories for the data. One image serves
# the agent (DaemonSet) and the collector (Deployment): the command says which.
#   deploy/image/build.sh [BUILD_DIR] [IMAGE]   (default: build, localhost/edgeprof:VERSION)
# Needs podman (Debian package). Prints the image name on success.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
version=$("$build/edgeprof" version | awk '{print $2}')
image=${2:-localhost/edgeprof:$version}
bin=$build/edgeprof
[ -x "$bin" ] || { echo "build.sh: $bin missing: run make first" >&2; exit 1; }

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/bin" "$root/tmp" "$root/var/lib/edgeprof" "$root/data" "$root/etc"
chmod 1777 "$root/tmp"
install -m 0755 "$bin" "$root/usr/bin/edgeprof"
# every library the binary loads, at the same paths (the loader included)
ldd "$bin" | awk '/=> \// {print $3} /^[ \t]*\/lib/ {print $1}' | sort -u | while read -r lib; do
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$lib" "$root$lib"
done
# libcurl/GnuTLS read these; a minimal passwd lets tools name uid 0
cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ca-certificates.crt" 2>/dev/null || true
printf 'root:x:0:0:root:/:/usr/bin/edgeprof\nnobody:x:65534:65534:nobody:/:/usr/bin/edgeprof\n' \
	>"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
tar -C "$root" -cf "$root.tar" .
podman import --quiet \
	--change 'ENTRYPOINT ["/usr/bin/edgeprof"]' \
	--change 'CMD ["help"]' \
	--change "LABEL org.opencontainers.image.title=edgeprof org.opencontainers.image.version=$version" \
	"$root.tar" "$image" >/dev/null
rm -f "$root.tar"
echo "$image"
