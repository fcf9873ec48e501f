#!/usr/bin/env bash
# etcd and nats-server (JetStream) for the dtp-cluster clients and their
# tests, from Debian's packages (etcd-server, nats-server).
#
#   bash scripts/cluster-servers.sh install   install both if missing (idempotent)
#   bash scripts/cluster-servers.sh start     start both on free loopback ports,
#                                             data under a new temp dir; prints
#                                             the URLs and the dir
#   bash scripts/cluster-servers.sh stop DIR  stop the servers started in DIR
#                                             and remove it
#
# The integration tests in engine/cluster/tests start servers of their own;
# `start` is for trying the clients by hand.
set -euo pipefail

bin() { PATH="$PATH:/usr/sbin:/usr/local/sbin:/sbin" command -v "$1" || true; }

install() {
    if [ -z "$(bin etcd)" ] || [ -z "$(bin nats-server)" ]; then
        # Tests run in parallel may call this at once: one at a time.
        exec 9>/tmp/dtp-cluster-servers.install.lock
        command -v flock >/dev/null && flock 9
        if [ -z "$(bin etcd)" ] || [ -z "$(bin nats-server)" ]; then
            export DEBIAN_FRONTEND=noninteractive
            apt-get -o DPkg::Lock::Timeout=600 update -qq
            # The packages' service units are not started here (no init in
            # a container; the tests start their own servers).
            apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
                etcd-server nats-server >/dev/null
        fi
    fi
    # sed reads to the end: with pipefail, head would make etcd die of SIGPIPE.
    "$(bin etcd)" --version | sed -n 1p
    "$(bin nats-server)" --version
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null \
        || echo $(( 20000 + RANDOM % 20000 ))
}

start() {
    local dir client peer nats
    dir="$(mktemp -d -t dtp-cluster-servers.XXXXXX)"
    client="$(free_port)"; peer="$(free_port)"; nats="$(free_port)"
    "$(bin etcd)" --name=dev --data-dir="$dir/etcd" \
        --listen-client-urls="http://127.0.0.1:$client" --advertise-client-urls="http://127.0.0.1:$client" \
        --listen-peer-urls="http://127.0.0.1:$peer" --initial-advertise-peer-urls="http://127.0.0.1:$peer" \
        --initial-cluster="dev=http://127.0.0.1:$peer" >"$dir/etcd.log" 2>&1 &
    echo $! >"$dir/etcd.pid"
    "$(bin nats-server)" -js -a 127.0.0.1 -p "$nats" -sd "$dir/nats" >"$dir/nats.log" 2>&1 &
    echo $! >"$dir/nats.pid"
    # Wait (bounded) until both accept connections.
    for _ in $(seq 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$client") 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$nats") 2>/dev/null; then
            echo "etcd=http://127.0.0.1:$client"
            echo "nats=nats://127.0.0.1:$nats"
            echo "dir=$dir"
            return 0
        fi
        sleep 0.1
    done
    echo "servers did not start; logs in $dir" >&2
    stop "$dir"
    return 1
}

stop() {
    local dir="${1:?usage: stop DIR}"
    for p in etcd nats; do
        if [ -f "$dir/$p.pid" ]; then
            kill "$(cat "$dir/$p.pid")" 2>/dev/null || true
        fi
    done
    for p in etcd nats; do
        if [ -f "$dir/$p.pid" ]; then
            while kill -0 "$(cat "$dir/$p.pid")" 2>/dev/null; do sleep 0.1; done
        fi
    done
    rm -rf "$dir"
}

case "${1:-}" in
    install) install ;;
    start) start ;;
    stop) stop "${2:-}" ;;
    *) echo "usage: $0 install | start | stop DIR" >&2; exit 2 ;;
esac
