#!/bin/bash
# usage: cg.sh BIN BACKEND SECONDS TAG
# The server under callgrind; counters zeroed when the load starts and dumped when it ends.
set -u; VGOPTS=${VGOPTS:-}
BIN=$1; BACKEND=$2; SECS=$3; TAG=$4
K=${KEYS:-$PWD/keys}; OUT=${OUT:-$PWD/runs}; mkdir -p "$OUT"; PORT=${PORT:-7812}
DTP_IO_BACKEND=$BACKEND valgrind --tool=callgrind $VGOPTS --callgrind-out-file=$OUT/$TAG.cg.%p --separate-threads=no \
  $BIN serve --listen 127.0.0.1:$PORT --no-admin --no-realtime --backend $BACKEND --shards 2 --config $K/dtp.toml >$OUT/$TAG.srv.out 2>$OUT/$TAG.srv.err &
VPID=$!
for i in $(seq 1 600); do grep -q listening $OUT/$TAG.srv.out 2>/dev/null && break; sleep 0.1; done
sleep 1
callgrind_control -z $VPID >/dev/null
DTP_IO_BACKEND=$BACKEND $BIN load --dtp --workload stream --target 127.0.0.1:$PORT --connections 4 --shards 2 --warmup 0 --duration $SECS --min-success 0.01 \
  --fay-key $K/fay.key --credential $K/fay.cred --pin-terminal $K/terminal.key.pub --json $OUT/$TAG.load.json >$OUT/$TAG.load.out 2>&1
callgrind_control -d $VPID >/dev/null
sleep 1
kill -INT $VPID; wait $VPID
python3 -c "import json;j=json.load(open('$OUT/$TAG.load.json'));print('$TAG delivered',j['dtp']['delivered'])"
ls $OUT/$TAG.cg.*
