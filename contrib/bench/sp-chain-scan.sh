#!/bin/sh
# A whole chain's remote scan for silent payments (Frigate's dialect), timed: the generated
# chain imported with `silent_payments = true`, then RUNS subscriptions of a random wallet
# (change's label only) from height 0, one after another on a fresh connection each, each until
# its notification at progress 1.0. Prints each run's wall and CPU time, then the medians as
# eligible transactions a second (wall) and a CPU-second: the scan's rate on this machine's
# cores, to set beside the arithmetic's one-core rate (`cargo bench --bench sp_scan`).
# cairn's cost throttling is off (as the other benches: the scan's speed, not the limits).
#
# Usage: sh contrib/bench/sp-chain-scan.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS]
# Defaults: 2000 blocks, 53 txs a block, 3 runs. SHAPE and SIGNATURES as lib.sh has them.
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=${3:-3}
. contrib/bench/lib.sh
bench_setup
cleanup() {
  [ -n "${CAIRN_PID:-}" ] && kill "$CAIRN_PID" 2>/dev/null
  sleep 1; rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
start=$(date +%s.%N)
"$CAIRN" --datadir "$WORK/cairn" --silent-payments import --quiet --blocks-dir "$CHAIN/blocks" >/dev/null 2>&1
echo "import with tweaks: $(elapsed "$start" "$(date +%s.%N)") s"
"$CAIRN" --datadir "$WORK/cairn" --silent-payments index-stats > "$WORK/stats.json"
ELIGIBLE=$(sed -n 's/^  "tweaked_txs": *\([0-9]*\).*/\1/p' "$WORK/stats.json")
echo "eligible transactions: $ELIGIBLE"
CAIRN_ELECTRUM_COST_SOFT_LIMIT=0 CAIRN_ELECTRUM_COST_HARD_LIMIT=0 \
  "$CAIRN" --datadir "$WORK/cairn" --silent-payments --admin-addr 127.0.0.1:0 --no-listen \
  --electrum-addr 127.0.0.1:29171 --electrum-idle-timeout-secs 86400 run >"$WORK/cairn.log" 2>&1 &
CAIRN_PID=$!
listening "$CAIRN_PID" 29171 "$WORK/cairn.log"
sleep 2
python3 contrib/bench/sp_chain_scan.py "$CAIRN_PID" 29171 "$RUNS" | tee "$WORK/runs.json"
wall=$(sed 's/.*"wall_s": \([0-9.]*\).*/\1/' "$WORK/runs.json" | median)
cpu=$(sed 's/.*"cpu_s": \([0-9.]*\).*/\1/' "$WORK/runs.json" | median)
out=$(results_file "sp-chain-scan-$BLOCKS-$TXS")
awk -v e="$ELIGIBLE" -v w="$wall" -v c="$cpu" -v cmd="$BENCH_COMMAND" -v cores="$(nproc)" 'BEGIN {
  printf "{\"command\": \"%s\", \"eligible\": %d, \"wall_s\": %s, \"cpu_s\": %s, \"cores\": %d, \"txs_per_s\": %.0f, \"txs_per_cpu_s\": %.0f}\n",
    cmd, e, w, c, cores, e / w, e / c }' | tee "$out"
