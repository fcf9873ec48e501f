#!/usr/bin/env bash
# Control-thread latency while OS access commands take 2 s (perf/control-blocking.md).
#
#   run.sh DTP LABEL [SLOW] [OS]
#
# Starts `DTP serve` with a terminal whose OS access command runs `sleep 2`
# for the resource slow-0 (grant and revoke; each one is counted in
# slow-ops-LABEL.log) and nothing for dec-0 … dec-15 (`sh` still starts).
# With SLOW=1 (default) two Fays hand slow-0 back and forth
# (`dtp load --control handovers`, restarted whenever it gives up) for the
# whole run; 3 s in, 16 Fays loop decisions on dec-* (`dtp load --control
# decisions`, 1 s warm-up, 10 s measured). OS=noop: no OS access command at
# all (the floor). Prints the reports; writes dec-LABEL.json in the working
# directory. Run it under `flock /tmp/dtp-bench.lock`.
set -u
DTP=$1; LABEL=$2; SLOW=${3:-1}; OS=${4:-command}
PORT=${PORT:-47311}
[ -f issuer.key ] || "$DTP" cred issuer-key --out issuer.key > /dev/null
[ -f terminal.key ] || "$DTP" cred noise-key --out terminal.key > /dev/null
{
  cat <<'TOML'
[admin]
listen = "127.0.0.1:0"

[dtp]
enabled = true
terminal_key = "terminal.key"
trust = ["issuer.key.pub"]
algorithms = ["aes-256-gcm"]

[terminal.control]
terminal_id = "bench"

[terminal.control.limits]
per_terminal = 256
per_fay = 4

[terminal.control.handover]
min_retry_interval_ms = 0

TOML
  for i in $(seq 0 15); do printf '[[terminal.control.resources]]\nresource_id = "dec-%d"\n\n' "$i"; done
  cat <<'TOML'
[[terminal.control.resources]]
resource_id = "slow-0"
handover_policy = "requester-wins"

[terminal.control.policies.requester-wins]
policy = { policy_type = "priority_script", script_id = "requester-wins" }
hard_timeout_ms = 2000

[terminal.policy.scripts]
requester-wins = "#{ source: 1, target: 2 }"

TOML
  if [ "$OS" = command ]; then
    CMD="case \\\"\$0\\\" in slow-*) echo op >> slow-ops-$LABEL.log; sleep 2;; esac"
    printf '[terminal.os_access]\nkind = "command"\n'
    printf 'grant = ["sh", "-c", "%s", "{resource_id}"]\n' "$CMD"
    printf 'revoke = ["sh", "-c", "%s", "{resource_id}"]\n' "$CMD"
    printf 'timeout_ms = 5000\n'
  fi
} > serve.toml
rm -f slow-ops-$LABEL.log
"$DTP" serve --listen 127.0.0.1:$PORT --no-realtime --shards 2 --config serve.toml > serve-$LABEL.log 2>&1 &
SRV=$!
for _ in $(seq 50); do grep -q "listening" serve-$LABEL.log && break; sleep 0.1; done
COMMON="--dtp --target 127.0.0.1:$PORT --issuer-key issuer.key --pin-terminal terminal.key.pub --shards 1 --min-success 0.000001"
if [ "$SLOW" = 1 ]; then
  touch slow-running
  ( while [ -e slow-running ]; do
      "$DTP" load $COMMON --control handovers --connections 2 --resources 1 --resource-prefix slow- \
          --warmup 0 --duration 4 >> slow-$LABEL.log 2>&1
    done ) &
  GEN=$!
  sleep 3
fi
"$DTP" load $COMMON --control decisions --connections 16 --resource-prefix dec- \
    --warmup 1 --duration 10 --json dec-$LABEL.json > dec-$LABEL.log 2>&1
rm -f slow-running
[ "$SLOW" = 1 ] && wait $GEN
kill $SRV; wait $SRV 2>/dev/null
cat dec-$LABEL.log
echo "2-second OS commands started during the run: $(cat slow-ops-$LABEL.log 2>/dev/null | wc -l)"
exit 0
