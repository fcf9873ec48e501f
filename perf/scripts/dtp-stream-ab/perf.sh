#!/bin/bash
# usage: perf.sh BIN BACKEND SECONDS TAG CALLGRAPH   (CALLGRAPH: fp | dwarf | none)
# Server and load as in run.sh; perf record -e cpu-clock attached to the server for SECONDS-2 s
# from 1 s into the load. Prints server CPU per delivered fragment over the whole load.
set -u
BIN=$1; BACKEND=$2; SECS=$3; TAG=$4; CG=$5
K=${KEYS:-$PWD/keys}; OUT=${OUT:-$PWD/runs}; mkdir -p "$OUT"; PORT=${PORT:-7813}
DTP_IO_BACKEND=$BACKEND $BIN serve --listen 127.0.0.1:$PORT --no-admin --no-realtime --backend $BACKEND --shards 2 --config $K/dtp.toml >$OUT/$TAG.srv.out 2>$OUT/$TAG.srv.err &
SPID=$!
for i in $(seq 1 300); do grep -q listening $OUT/$TAG.srv.out 2>/dev/null && break; sleep 0.1; done
cpu() { awk '{print $14+$15}' /proc/$SPID/stat; }
C0=$(cpu)
DTP_IO_BACKEND=$BACKEND $BIN load --dtp --workload stream --target 127.0.0.1:$PORT --connections 4 --shards 2 --warmup 0 --duration $SECS \
  --fay-key $K/fay.key --credential $K/fay.cred --pin-terminal $K/terminal.key.pub --json $OUT/$TAG.load.json >$OUT/$TAG.load.out 2>&1 &
LPID=$!
sleep 1
case $CG in fp) G="-g";; dwarf) G="--call-graph dwarf,16384";; *) G="";; esac
perf record -q -e cpu-clock -F ${FREQ:-1999} $G -p $SPID -o $OUT/$TAG.perf.data -- sleep $((SECS-2)) 2>$OUT/$TAG.perf.err
wait $LPID
C1=$(cpu); TH=$(for t in /proc/$SPID/task/*; do awk '{gsub(/[()]/,"",$2); printf "%s=%.2fs ", $2, ($14+$15)/100}' $t/stat; done)
kill -INT $SPID; wait $SPID 2>/dev/null
python3 -c "
import json;j=json.load(open('$OUT/$TAG.load.json'));d=j['dtp']['delivered'];c=($C1-$C0)/$(getconf CLK_TCK)
print('$TAG: server cpu %.3fs delivered %d -> %.0f ns/fragment  threads: '%(c,d,c*1e9/d))"
