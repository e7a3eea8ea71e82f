#!/usr/bin/env bash
# Start a private Docker engine from .engine/docker-engine.tar.xz (made by fetch-engine.sh), on a
# machine that has no Docker installed (the lent GPU machine). Run as root, from the repository root:
#
#     bash sandbox/engine/start-engine.sh        # starts it (or finds it running); prints the exports
#     source sandbox/engine/start-engine.sh      # the same, and exports DOCKER_HOST and PATH here
#
# It unpacks the binaries into $KD_ENGINE_DIR/bin (default /tmp/kd-engine), and starts dockerd (which
# starts and supervises containerd) in its own session (setsid), so that it outlives this command:
# data root, exec root, socket and log under $KD_ENGINE_DIR; no iptables, no bridge, no userland
# proxy (containers run with network none); storage driver overlay2, else vfs (the skeleton image
# is a few kilobytes: vfs costs nothing there). With .engine/runsc.tar.xz it registers gVisor as
# runtime "runsc". Idempotent: an engine that answers already is left alone.
#
# Settings: KD_ENGINE_DIR, KD_ENGINE_ARCHIVE, KD_ENGINE_RUNSC_ARCHIVE, KD_ENGINE_STORAGE (the drivers
# to try, in order; default "overlay2 vfs"), KD_ENGINE_WAIT (seconds per try; default 40),
# KD_ENGINE_LOG_LEVEL (dockerd's; default info).

kd_engine_start() {
    local dir=${KD_ENGINE_DIR:-/tmp/kd-engine}
    local archive=${KD_ENGINE_ARCHIVE:-.engine/docker-engine.tar.xz}
    local runsc_archive=${KD_ENGINE_RUNSC_ARCHIVE:-.engine/runsc.tar.xz}
    local sock=$dir/docker.sock
    local wait_s=${KD_ENGINE_WAIT:-40}

    export DOCKER_HOST=unix://$sock
    case ":$PATH:" in *":$dir/bin:"*) ;; *) export PATH=$dir/bin:$PATH ;; esac

    if _kd_ping "$dir"; then
        echo "kd-engine: already running ($(_kd_summary "$dir"))"
        _kd_exports "$dir"
        return 0
    fi
    if [[ $(id -u) != 0 ]]; then
        echo "kd-engine: dockerd must run as root here (no rootless setup); id: $(id)" >&2
        return 1
    fi
    mkdir -p "$dir" || return 1

    # 1. The binaries, unpacked again when the archive changed.
    _kd_unpack "$archive" "$dir" engine || return 1
    if [[ -f $runsc_archive ]]; then
        _kd_unpack "$runsc_archive" "$dir" runsc || echo "kd-engine: runsc not unpacked; going on without it" >&2
    fi

    # 2. Shared libraries the host lacks come from lib/ (only those: the host's own are kept).
    _kd_libraries "$dir" || return 1

    # 3. cgroups: runc needs a cgroup file system; mount cgroup2 where none is mounted.
    _kd_cgroups || return 1

    # 4. dockerd, one storage driver after the other.
    local daemon_pid="" driver
    [[ -f $dir/dockerd.pid ]] && daemon_pid=$(cat "$dir/dockerd.pid" 2>/dev/null)
    if [[ -n $daemon_pid ]] && kill -0 "$daemon_pid" 2>/dev/null; then
        echo "kd-engine: dockerd (pid $daemon_pid) runs but does not answer yet; waiting"
        if _kd_wait "$dir" "$daemon_pid" "$wait_s"; then
            _kd_exports "$dir"
            return 0
        fi
        echo "kd-engine: dockerd (pid $daemon_pid) does not answer; its log ends:" >&2
        tail -n 30 "$dir/dockerd.log" >&2
        return 1
    fi
    for driver in ${KD_ENGINE_STORAGE:-overlay2 vfs}; do
        daemon_pid=$(_kd_launch "$dir" "$driver") || return 1
        if _kd_wait "$dir" "$daemon_pid" "$wait_s"; then
            daemon_pid=$(cat "$dir/dockerd.pid" 2>/dev/null || echo "$daemon_pid")
            echo "kd-engine: started, pid $daemon_pid, storage $driver ($(_kd_summary "$dir"))"
            echo "$driver" > "$dir/storage-driver"
            _kd_exports "$dir"
            return 0
        fi
        echo "kd-engine: dockerd with storage driver $driver did not answer within ${wait_s}s; command:" >&2
        cat "$dir/dockerd.cmd" >&2
        echo "kd-engine: its log ($dir/dockerd.log.$driver) ends:" >&2
        grep -v 'module=grpc' "$dir/dockerd.log" | tail -n 40 >&2
        cp "$dir/dockerd.log" "$dir/dockerd.log.$driver" 2>/dev/null
        _kd_stop "$dir" "$daemon_pid"
        rm -f "$dir/dockerd.pid" "$sock"
    done
    echo "kd-engine: dockerd did not start with any storage driver (${KD_ENGINE_STORAGE:-overlay2 vfs})" >&2
    return 1
}

_kd_ping() {  # the daemon answers /_ping on the socket
    [[ -S $1/docker.sock ]] || return 1
    if [[ -x $1/bin/docker ]]; then
        timeout 10 "$1/bin/docker" -H "unix://$1/docker.sock" version --format '{{.Server.Version}}' >/dev/null 2>&1
    else
        timeout 10 python3 - "$1/docker.sock" <<'PY' >/dev/null 2>&1
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
sys.exit(0 if s.recv(4096).split(b"\r\n\r\n")[-1].strip() == b"OK" else 1)
PY
    fi
}

_kd_summary() {
    [[ -x $1/bin/docker ]] || { echo "socket $1/docker.sock"; return; }
    timeout 10 "$1/bin/docker" -H "unix://$1/docker.sock" info --format \
        'docker {{.ServerVersion}}, storage {{.Driver}}, cgroup v{{.CgroupVersion}} ({{.CgroupDriver}}), runtimes{{range $k, $v := .Runtimes}} {{$k}}{{end}}, kernel {{.KernelVersion}}' 2>&1
}

_kd_exports() {
    {
        echo "export DOCKER_HOST=unix://$1/docker.sock"
        echo "export PATH=$1/bin:\$PATH"
    } | tee "$1/env"
}

_kd_unpack() {  # _kd_unpack ARCHIVE DIR NAME: ARCHIVE's top folder's content into DIR, once per archive
    local archive=$1 dir=$2 name=$3 stamp
    if [[ ! -f $archive ]]; then
        echo "kd-engine: no $archive here (cwd $(pwd)): run sandbox/engine/fetch-engine.sh on a machine with apt, and carry .engine" >&2
        return 1
    fi
    stamp=$(stat -c '%s %Y' "$archive")
    [[ -f $dir/.unpacked-$name && $(cat "$dir/.unpacked-$name") == "$stamp" ]] && return 0
    if command -v xz >/dev/null; then
        xz -dc "$archive" | tar -C "$dir" --strip-components=1 --no-same-owner -xf - || return 1
    else  # Python's lzma reads the x86 filter as well
        python3 - "$archive" "$dir" <<'PY' || return 1
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as tar:
    for member in tar.getmembers():
        member.name = member.name.partition("/")[2]
        if member.name:
            tar.extract(member, sys.argv[2])
PY
    fi
    echo "$stamp" > "$dir/.unpacked-$name"
    echo "kd-engine: unpacked $archive into $dir ($(tr '\n' ';' < "$dir/VERSIONS" 2>/dev/null))"
}

_kd_libraries() {  # link into lib.use/ each library of ours the host cannot provide
    local dir=$1 round missing lib
    mkdir -p "$dir/lib.use"
    rm -f "$dir"/lib.use/*
    if ! command -v ldd >/dev/null; then
        echo "kd-engine: no ldd here; using every library of $dir/lib" >&2
        ln -sf ../lib/* "$dir/lib.use/"
        return 0
    fi
    for round in 1 2 3 4; do
        missing=$(for b in "$dir"/bin/dockerd "$dir"/bin/runc "$dir"/bin/containerd "$dir"/bin/containerd-shim-runc-v2 \
                           "$dir"/lib.use/*; do
                      [[ -e $b ]] && LD_LIBRARY_PATH=$dir/lib.use ldd "$b" 2>/dev/null
                  done | awk '/not found/ {print $1}' | sort -u)
        [[ -z $missing ]] && break
        for lib in $missing; do
            if [[ -e $dir/lib/$lib ]]; then
                ln -sf "../lib/$lib" "$dir/lib.use/$lib"
            else
                echo "kd-engine: the host lacks $lib and the archive has no copy" >&2
                return 1
            fi
        done
    done
    if compgen -G "$dir/lib.use/*" >/dev/null; then
        echo "kd-engine: from the archive (the host lacks them): $(cd "$dir/lib.use" && echo *)"
    fi
    # `runc init` is started with a fresh environment, so LD_LIBRARY_PATH does not reach it: where
    # the host lacks one of runc's libraries, it goes into the loader's cache instead.
    missing=$(LD_LIBRARY_PATH="" ldd "$dir/bin/runc" 2>/dev/null | awk '/not found/ {print $1}')
    if [[ -n $missing ]]; then
        mkdir -p /usr/local/lib/kd-engine
        for lib in $missing; do cp -L "$dir/lib/$lib" /usr/local/lib/kd-engine/; done
        echo /usr/local/lib/kd-engine > /etc/ld.so.conf.d/kd-engine.conf
        ldconfig
        echo "kd-engine: runc's $missing installed into /usr/local/lib/kd-engine (ldconfig)"
    fi
}

_kd_cgroups() {
    if awk '$5 == "/sys/fs/cgroup" {found = 1} END {exit !found}' /proc/self/mountinfo; then
        return 0
    fi
    if grep -qw cgroup2 /proc/filesystems; then
        mkdir -p /sys/fs/cgroup
        if mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup 2>/dev/null || mount -t cgroup2 cgroup2 /sys/fs/cgroup; then
            echo "kd-engine: mounted cgroup2 at /sys/fs/cgroup (controllers: $(cat /sys/fs/cgroup/cgroup.controllers))"
            return 0
        fi
    fi
    echo "kd-engine: no cgroup file system at /sys/fs/cgroup and none could be mounted; /proc/filesystems:" >&2
    grep cgroup /proc/filesystems >&2
    return 1
}

_kd_launch() {  # start dockerd in its own session; prints its pid
    local dir=$1 driver=$2 libs=""
    mkdir -p "$dir/data" "$dir/exec"
    # Our own configuration, not /etc/docker/daemon.json. runsc's own network stack is off: the
    # containers run with network none, and runsc refuses that network mode without --network=none.
    if [[ -x $dir/bin/runsc ]]; then
        printf '{"runtimes": {"runsc": {"path": "%s", "runtimeArgs": ["--network=none"]}}}\n' "$dir/bin/runsc" \
            > "$dir/daemon.json"
    else
        echo '{}' > "$dir/daemon.json"
    fi
    compgen -G "$dir/lib.use/*" >/dev/null && libs=$dir/lib.use
    local cmd=(dockerd --config-file "$dir/daemon.json" --data-root "$dir/data" --exec-root "$dir/exec"
               --pidfile "$dir/dockerd.pid" -H "unix://$dir/docker.sock" --storage-driver "$driver"
               --iptables=false --ip-forward=false --ip-masq=false --bridge=none --userland-proxy=false
               --init-path "$dir/bin/docker-init" --log-level "${KD_ENGINE_LOG_LEVEL:-info}")
    echo "PATH=$dir/bin:\$PATH LD_LIBRARY_PATH=$libs setsid ${cmd[*]}" > "$dir/dockerd.cmd"
    rm -f "$dir/docker.sock"
    PATH=$dir/bin:$PATH LD_LIBRARY_PATH=$libs setsid "${cmd[@]}" </dev/null >"$dir/dockerd.log" 2>&1 &
    echo $!
}

_kd_stop() {  # _kd_stop DIR PID: end the dockerd this script started, and the containerd it started
    local dir=$1 pid=$2 containerd i
    [[ -f $dir/dockerd.pid ]] && pid=$(cat "$dir/dockerd.pid")
    containerd=$(cat "$dir/exec/containerd/containerd.pid" 2>/dev/null)
    kill -TERM "$pid" 2>/dev/null  # dockerd stops its containerd itself
    for i in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$pid" 2>/dev/null
    [[ -n $containerd ]] && kill -0 "$containerd" 2>/dev/null && kill -KILL "$containerd" 2>/dev/null
    return 0
}

_kd_wait() {  # _kd_wait DIR PID SECONDS: until the socket answers, the daemon dies or time is up
    local dir=$1 pid=$2 deadline=$((SECONDS + $3))
    while ((SECONDS < deadline)); do
        _kd_ping "$dir" && return 0
        # setsid forks where it was started as a group leader (a shell with job control): then the
        # pid file names the daemon
        if ! kill -0 "$pid" 2>/dev/null && ! kill -0 "$(cat "$dir/dockerd.pid" 2>/dev/null)" 2>/dev/null; then
            sleep 1
            _kd_ping "$dir" && return 0
            echo "kd-engine: dockerd (pid $pid) exited" >&2
            return 1
        fi
        sleep 0.5
    done
    return 1
}

if (return 0 2>/dev/null); then  # sourced: exports stay in the caller's shell
    kd_engine_start
else
    kd_engine_start
    exit $?
fi
