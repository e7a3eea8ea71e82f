#!/usr/bin/env bash
# Pack a Docker engine that runs without being installed, for the lent GPU machine (no Docker, no
# network there). Run on a Debian/Ubuntu machine with apt, from the repository root:
#
#     bash sandbox/engine/fetch-engine.sh          # -> .engine/docker-engine.tar.xz (+ .engine/runsc.tar.xz)
#
# What it takes, with `apt-get download` (nothing is installed here):
#   docker.io   dockerd, docker (the CLI: optional, KD_ENGINE_CLI=0 leaves it out)
#   containerd  containerd, containerd-shim-runc-v2 (dockerd starts and supervises containerd itself)
#   runc        runc
#   tini        tini-static, shipped as docker-init (PID 1 of a container run with init=True)
#   runsc       gVisor, only when KD_ENGINE_RUNSC is not 0, as a separate archive
# and, under lib/, the shared libraries dockerd and runc link besides the C library (libdevmapper,
# libsystemd, libseccomp, ...). start-engine.sh uses one of those only where the host lacks it.
# Not taken: iptables, docker-proxy, the NVIDIA container toolkit (dockerd runs with
# --iptables=false --bridge=none --userland-proxy=false; GPUs go in as device nodes, sandbox/docker_gpu.py).
#
# The archives land in .engine/ (ignored through .git/info/exclude); a device run carries
# [".engine"] and calls sandbox/engine/start-engine.sh there.
set -euo pipefail

root=$(pwd)
[[ -d $root/.git && -d $root/sandbox ]] || { echo "run this from the repository's root" >&2; exit 2; }
out=$root/.engine
mkdir -p "$out" "$root/.git/info"
grep -qx '/.engine/' "$root/.git/info/exclude" 2>/dev/null || echo '/.engine/' >> "$root/.git/info/exclude"

engine_packages=(docker.io containerd runc tini)
# What dockerd (libdevmapper, libsystemd and their own needs) and runc (libseccomp) link besides libc:
# Debian's Depends of these packages, closed over. A bare Ubuntu/Debian image has most of them; not libdevmapper.
library_packages=(libdevmapper1.02.1 libsystemd0 libudev1 libseccomp2 libselinux1 libpcre2-8-0 libcap2
                  libgcrypt20 libgpg-error0 liblz4-1 liblzma5 libzstd1)
XZ_OPTS=${KD_XZ_OPTS:--T0 --x86 --lzma2=preset=9e,dict=192MiB}  # BCJ filter + one dictionary over all files

work=$(mktemp -d /tmp/kd-fetch-engine.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"

has_candidate() { [[ $(apt-cache policy "$1" 2>/dev/null) == *"Candidate: "[0-9]* ]]; }  # no grep -q: SIGPIPE under pipefail
if ! has_candidate docker.io; then
    echo "apt knows no docker.io candidate; running apt-get update" >&2
    apt-get update -q
fi
packages=("${engine_packages[@]}" "${library_packages[@]}")
want_runsc=${KD_ENGINE_RUNSC:-1}
if [[ $want_runsc != 0 ]] && has_candidate runsc; then
    packages+=(runsc)
else
    want_runsc=0
fi
(cd "$work" && apt-get -q -o APT::Sandbox::User=root download "${packages[@]}")

stage=$work/stage/kd-engine
mkdir -p "$stage/bin" "$stage/lib" "$work/x"
for deb in "$work"/*.deb; do
    dpkg-deb -x "$deb" "$work/x"
    dpkg-deb --show --showformat='${Package} ${Version}\n' "$deb" >> "$work/versions"
done
x=$work/x
take() {  # take SOURCE [NAME]: a regular file (links resolved) into bin/
    local src=$1 name=${2:-$(basename "$1")}
    [[ -e $src ]] || { echo "missing in the packages: $src" >&2; exit 1; }
    cp -L "$src" "$stage/bin/$name"
    chmod 755 "$stage/bin/$name"
}
take "$x/usr/sbin/dockerd"
[[ ${KD_ENGINE_CLI:-1} == 0 ]] || take "$x/usr/bin/docker"
take "$x/usr/bin/containerd"
take "$x/usr/bin/containerd-shim-runc-v2"
take "$x/usr/sbin/runc"
take "$x/usr/bin/tini-static" docker-init
# The libraries, by soname, as regular files (lib/ is a fallback: see start-engine.sh).
for lib in "$x"/usr/lib/x86_64-linux-gnu/lib*.so.* "$x"/lib/x86_64-linux-gnu/lib*.so.*; do
    [[ -e $lib ]] || continue
    soname=$(objdump -p "$lib" 2>/dev/null | awk '/SONAME/{print $2}')
    [[ -n $soname && ! -e $stage/lib/$soname ]] && cp -L "$lib" "$stage/lib/$soname"
done
{ grep -v '^runsc ' "$work/versions" || true; } | sort > "$stage/VERSIONS"

# Every library the binaries need is either the C library's or in lib/.
missing=$(for b in "$stage"/bin/*; do LD_LIBRARY_PATH=$stage/lib ldd "$b" 2>/dev/null | grep 'not found' || true; done)
if [[ -n $missing ]]; then
    echo "unresolved libraries:" >&2
    echo "$missing" >&2
    exit 1
fi
echo "glibc symbol versions needed (the host's C library must be at least the newest):"
for b in "$stage"/bin/* "$stage"/lib/*; do objdump -T "$b" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' || true; done | sort -Vu | tail -1

pack() {  # pack ARCHIVE DIR...: a tar.xz, fixed owners and times, relative to $work/stage
    local archive=$1
    shift
    tar -C "$work/stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - "$@" \
        | xz $XZ_OPTS -c > "$archive.part"
    mv "$archive.part" "$archive"
}
echo "compressing (xz; a minute or two)..."
pack "$out/docker-engine.tar.xz" kd-engine

if [[ $want_runsc != 0 ]]; then
    mkdir -p "$work/stage/kd-runsc/bin"
    cp -L "$x/usr/bin/runsc" "$work/stage/kd-runsc/bin/runsc"
    chmod 755 "$work/stage/kd-runsc/bin/runsc"
    grep '^runsc ' "$work/versions" > "$work/stage/kd-runsc/VERSIONS"
    pack "$out/runsc.tar.xz" kd-runsc
else
    rm -f "$out/runsc.tar.xz"
    echo "no runsc package: .engine/runsc.tar.xz not made"
fi

cat "$work/versions"
ls -l "$stage/bin" "$stage/lib"
du -b "$out"/*.tar.xz
du -sh "$out"
