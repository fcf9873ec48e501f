#!/bin/bash
# usage: run.sh BIN BACKEND SECONDS TAG [WRAP...]
# Starts `BIN serve` (DTP config, 2 shards), drives it with `BIN load --dtp --workload stream`
# (4 connections, 2 client shards, no warm-up), prints server CPU ns per delivered fragment.
# WRAP (optional) is a command prefix for the server (perf record ..., valgrind ...).
set -u
BIN=$1; LBIN=${LBIN:-$1}; BACKEND=$2; SECS=$3; TAG=$4; shift 4
K=${KEYS:-$PWD/keys}; OUT=${OUT:-$PWD/runs}; mkdir -p "$OUT"; PORT=${PORT:-7811}
DTP_IO_BACKEND=$BACKEND "$@" $BIN ${SERVE:-serve --no-admin --no-realtime --backend $BACKEND --shards 2} --listen 127.0.0.1:$PORT --config $K/dtp.toml >$OUT/$TAG.srv.out 2>$OUT/$TAG.srv.err &
WPID=$!
for i in $(seq 1 300); do grep -q listening $OUT/$TAG.srv.out 2>/dev/null && break; sleep 0.1; done
# the server pid: the dtp process (child of the wrapper, or the wrapper itself)
SPID=$(pgrep -n -f "serve --listen 127.0.0.1:$PORT" -x -P $WPID 2>/dev/null || true)
[ -z "$SPID" ] && SPID=$(pgrep -f "^$BIN .*--listen 127.0.0.1:$PORT" | head -1)
[ -z "$SPID" ] && SPID=$WPID
cpu() { awk '{print $14+$15}' /proc/$SPID/stat; }
C0=$(cpu); T0=$(date +%s.%N)
( sleep 1; ss -tnpH state established "( sport = :$PORT )" > $OUT/$TAG.ss ) &
DTP_IO_BACKEND=$BACKEND $LBIN load --dtp --workload stream --target 127.0.0.1:$PORT --connections 4 --shards 2 --warmup 0 --duration $SECS \
  --fay-key $K/fay.key --credential $K/fay.cred --pin-terminal $K/terminal.key.pub --json $OUT/$TAG.load.json >$OUT/$TAG.load.out 2>&1
C1=$(cpu); T1=$(date +%s.%N)
TH=$(for t in /proc/$SPID/task/*; do awk '{gsub(/[()]/,"",$2); printf "%s=%.2fs ", $2, ($14+$15)/100}' $t/stat; done)
kill -INT $WPID 2>/dev/null; sleep 0.5; kill -INT $SPID 2>/dev/null; sleep 0.3; kill -TERM $SPID 2>/dev/null; wait $WPID 2>/dev/null
TCK=$(getconf CLK_TCK)
python3 - "$OUT/$TAG.load.json" $C0 $C1 $TCK $T0 $T1 $TAG "$TH" <<'PY'
import json,sys
j=json.load(open(sys.argv[1])); c0,c1,tck=int(sys.argv[2]),int(sys.argv[3]),int(sys.argv[4])
d=j.get('dtp',{}); deliv=d.get('delivered') or d.get('fragments_delivered')
cpu_ns=(c1-c0)/tck*1e9
print(f"{sys.argv[7]}: server cpu {cpu_ns/1e9:.3f}s wall {float(sys.argv[6])-float(sys.argv[5]):.2f}s delivered {deliv} -> {cpu_ns/deliv:.0f} ns/fragment  threads: {sys.argv[8]}")
PY
