#!/usr/bin/env bash
# A local Valkey Cluster of our build on loopback, for trying things out and
# for tests: nodes on consecutive ports, each in its own folder under
# build/cluster/, made into a cluster by `valkey-cli --cluster create`.
#
#   utils/cluster.sh start     start the nodes (NODES, default 6)
#   utils/cluster.sh create    make them a cluster: NODES/(REPLICAS+1) primaries
#   utils/cluster.sh status    the cluster as valkey-cli --cluster check sees it
#   utils/cluster.sh stop      shut every node down (no save)
#   utils/cluster.sh clean     stop, then remove build/cluster/
#
# Settings (environment): PORT (first port, default 30001), NODES (6),
# REPLICAS (1), SERVER (the valkey-server to run, default ours; the
# reference build is build/upstream/src/valkey-server), TIMEOUT (the
# cluster-node-timeout in ms, default 5000).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PORT=${PORT:-30001}
NODES=${NODES:-6}
REPLICAS=${REPLICAS:-1}
SERVER=${SERVER:-$ROOT/src/valkey-server}
CLI=$ROOT/src/valkey-cli
TIMEOUT=${TIMEOUT:-5000}
DIR=$ROOT/build/cluster

die() {
    echo "cluster.sh: $*" >&2
    exit 1
}

ports() { seq "$PORT" $((PORT + NODES - 1)); }

alive() { "$CLI" -p "$1" ping >/dev/null 2>&1; }

start() {
    [ -x "$SERVER" ] || die "no server at $SERVER (run make first)"
    for p in $(ports); do
        if alive "$p"; then
            echo "node $p: already running"
            continue
        fi
        mkdir -p "$DIR/$p"
        "$SERVER" --port "$p" --bind 127.0.0.1 --daemonize yes --dir "$DIR/$p" \
            --pidfile "$DIR/$p/valkey.pid" --logfile "$DIR/$p/valkey.log" \
            --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout "$TIMEOUT" \
            --appendonly no --save ''
    done
    for p in $(ports); do
        for _ in $(seq 50); do alive "$p" && break || sleep 0.1; done
        alive "$p" || die "node $p did not start; see $DIR/$p/valkey.log"
    done
    echo "started $NODES nodes on ports $PORT..$((PORT + NODES - 1)) ($SERVER)"
}

create() {
    local addrs=()
    for p in $(ports); do addrs+=("127.0.0.1:$p"); done
    "$CLI" --cluster create "${addrs[@]}" --cluster-replicas "$REPLICAS" --cluster-yes
    for _ in $(seq 100); do
        "$CLI" -p "$PORT" cluster info 2>/dev/null | grep -q '^cluster_state:ok' && break
        sleep 0.1
    done
    "$CLI" -p "$PORT" cluster info | grep -q '^cluster_state:ok' || die "the cluster did not reach state ok"
    echo "cluster ok: connect with $CLI -c -p $PORT"
}

status() { "$CLI" --cluster check "127.0.0.1:$PORT"; }

stop() {
    for p in $(ports); do
        alive "$p" && "$CLI" -p "$p" shutdown nosave >/dev/null 2>&1 || true
    done
    for p in $(ports); do
        for _ in $(seq 50); do alive "$p" && sleep 0.1 || break; done
        alive "$p" && die "node $p does not stop"
    done
    echo "stopped"
}

case "${1:-}" in
start) start ;;
create) create ;;
status) status ;;
stop) stop ;;
clean)
    stop
    rm -rf "$DIR"
    ;;
*) die "usage: $0 start|create|status|stop|clean" ;;
esac
