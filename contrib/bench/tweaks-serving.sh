#!/bin/sh
# Silent-payment tweak serving: Cake Wallet's electrs fork (cake-tech/blockstream-electrs,
# branch cake-update-v1, commit cf9e03b) against cairn, both answering
# `blockchain.block.tweaks` for every height from taproot's activation (regtest: 0) to the tip,
# pipelined over one TCP connection, PASSES times over per run, the two taking turns
# (A B A B ...), RUNS times each. Prints seconds per run, blocks/s and the ratio.
#
# Both hold the same chain (`cairn generate`, chain S by default): a regtest bitcoind
# (Knots 29.4) loads its blk files and Cake's electrs indexes it over RPC (--jsonrpc-import:
# its blk-file import drops the blocks of the last blk file it reads, and then aborts when asked
# for their tweaks);
# cairn imports the same blk files with silent_payments on. Before timing, every height's
# answer from both is compared (same tweaks, same order; both leave out transactions whose
# taproot outputs are all below 1,000 sat).
#
# Usage: sh contrib/bench/tweaks-serving.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS] [PASSES]
# Defaults: 2000 blocks, 53 txs per block, 3 runs, 5 passes.
# Needs: CAKE_ELECTRS (default /var/tmp/cake-electrs-target/release/electrs, which
# contrib/install-cake-electrs.sh builds when it is missing: about 11 minutes; CAKE_SRC and
# SILENTPAYMENTS_SRC for mirrors where GitHub is out of reach).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=${3:-3}
PASSES=${4:-5}
CAKE=${CAKE_ELECTRS:-/var/tmp/cake-electrs-target/release/electrs}
[ -x "$CAKE" ] || [ -n "${CAKE_ELECTRS:-}" ] || sh contrib/install-cake-electrs.sh
[ -x "$CAKE" ] || { echo "no Cake electrs at $CAKE: build it with contrib/install-cake-electrs.sh"; exit 1; }
. contrib/bench/lib.sh
bench_setup
# silent_payments = true for `cairn import` (tweaks built with the blocks) and for `cairn run`.
export CAIRN_SILENT_PAYMENTS=true
CLIENT="python3 $HERE/tweaks_client.py"

cleanup() {
  [ -n "${CAKE_PID:-}" ] && kill "$CAKE_PID" 2>/dev/null
  stack_cleanup   # cairn, `node_rpc stop`, rm -rf $WORK
}
trap cleanup EXIT INT TERM

# 1. bitcoind holding the chain (no -txindex: Cake's electrs reads blocks by hash and prevouts
#    from its own txstore). -maxtipage: the generated chain is dated 2011, and electrs waits for
#    initialblockdownload=false and blocks == headers before it starts.
mkdir -p "$WORK/node"
"$BITCOIND" -regtest -datadir="$WORK/node" -rpcport=29041 -rpcuser=u -rpcpassword=p \
  -listen=0 -maxtipage=2000000000 $(loadblock_args) -daemon -printtoconsole=0 >/dev/null
until [ "$(node_rpc getblockcount 2>/dev/null || echo 0)" = "$BLOCKS" ]; do sleep 0.5; done
until node_rpc getblockchaininfo | grep -q '"initialblockdownload": false'; do sleep 0.5; done

# 2. Cake's electrs: indexes (txstore, history, tweaks: three passes over getblock RPC, then a
#    full compaction of each) and only then listens; the index time is start to listening.
#    --cookie takes "user:password" itself (not a file). --daemon-dir gets "regtest" appended.
#    --sp-begin-height 0: otherwise tweaks start at 823,807 (its mainnet default) and regtest
#    gets none. --sp-min-dust 1000 is its default, written out. -v would log every block.
cake_start=$(date +%s.%N)
"$CAKE" --network regtest --daemon-dir "$WORK/node" --daemon-rpc-addr 127.0.0.1:29041 \
  --cookie u:p --jsonrpc-import --db-dir "$WORK/cake" \
  --electrum-rpc-addr 127.0.0.1:29071 --http-addr 127.0.0.1:29072 \
  --monitoring-addr 127.0.0.1:29073 \
  --sp-begin-height 0 --sp-min-dust 1000 >"$WORK/cake.log" 2>&1 &
CAKE_PID=$!
until nc -z 127.0.0.1 29071 2>/dev/null; do
  kill -0 "$CAKE_PID" 2>/dev/null || { tail -20 "$WORK/cake.log"; exit 1; }
  sleep 0.2
done
CAKE_INDEX_SECONDS=$(elapsed "$cake_start" "$(date +%s.%N)")

# 3. cairn: `cairn import` (validation + index + tweaks), then `cairn run` serving Electrum.
cairn_stack --electrum-addr 127.0.0.1:29061
# cairn answers an error while tweaks are still being built: wait for the tip's answer.
until $CLIENT 29061 "$BLOCKS" "$BLOCKS" 1 >/dev/null 2>&1; do sleep 0.5; done
echo "index build: Cake electrs ${CAKE_INDEX_SECONDS}s (over RPC, trusts bitcoind), cairn ${CAIRN_INDEX_SECONDS}s (validation included)"

# 4. Untimed: both servers' answers for every height, compared.
$CLIENT 29071 0 "$BLOCKS" 1 --dump "$WORK/cake.json" >/dev/null
$CLIENT 29061 0 "$BLOCKS" 1 --dump "$WORK/cairn.json" >/dev/null
MISMATCHES=$(python3 - "$WORK/cake.json" "$WORK/cairn.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
bad = [h for h in a if a[h] != b.get(h)]
for h in bad[:5]:
    sys.stderr.write("height %s: Cake %d tweaks, cairn %d\n" % (h, len(a[h] or []), len(b.get(h) or [])))
sys.stderr.write("%d heights, %d tweaks (Cake), %d (cairn), %d heights differ\n" % (
    len(a), sum(len(v or []) for v in a.values()), sum(len(v or []) for v in b.values()), len(bad)))
print(len(bad))
PY
)

# 5. Timed, interleaved.
cake_run() { $CLIENT 29071 0 "$BLOCKS" "$PASSES" 2>/dev/null; }
cairn_run() { $CLIENT 29061 0 "$BLOCKS" "$PASSES" 2>/dev/null; }
N=$(( (BLOCKS + 1) * PASSES ))
bench_extra() {
  printf '{"blocks_per_run": %s, "passes": %s, "cake_index_s": %s, "cairn_index_s": %s, "mismatched_heights": %s, "cake_commit": "cf9e03b4d524581964d2678745ffb78e3bc43869"}' \
    "$N" "$PASSES" "$CAKE_INDEX_SECONDS" "$CAIRN_INDEX_SECONDS" "$MISMATCHES"
}
compare "Cake electrs (cake-update-v1)" cake_run "cairn" cairn_run
# compare leaves the samples in $WORK/samples-{a,b}.txt (seconds); as blocks per second:
ma=$(median < "$WORK/samples-a.txt"); mb=$(median < "$WORK/samples-b.txt")
awk -v n="$N" -v a="$ma" -v b="$mb" 'BEGIN {
  printf "blocks/s (median): Cake electrs %.0f, cairn %.0f; cairn / Cake = %.2fx\n", n / a, n / b, a / b }'
[ "$MISMATCHES" = 0 ] || echo "WARNING: $MISMATCHES heights answered differently (see above)"
