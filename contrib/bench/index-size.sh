#!/bin/sh
# Index size, without the cold-start timing around it: what cairn and electrs 0.11.1 each keep
# to answer the same questions (any transaction by txid, histories, BIP158 filters) on one chain.
#   cairn   `cairn import` into an empty data dir, then `cairn index-stats` (compacted); the
#           figure leaves out the `undo` rows of recent blocks, which a later start deletes.
#   electrs a bitcoind -txindex -blockfilterindex loading the same blk files (-loadblock), electrs
#           indexing it; its database plus bitcoind's two indexes.
# Prints both, the ratio, and writes them to a JSON file. `cold-start.sh` measures the same on
# the chain it syncs; this script is for chains where a cold-start round takes too long (M).
#
# Usage: contrib/bench/index-size.sh [BLOCKS] [TXS_PER_BLOCK]     (SHAPE=mainnet for that shape)
# Defaults: 2000 blocks, 53 txs per block. Installs electrs (contrib/install-electrs.sh) if missing.
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
. contrib/bench/lib.sh
bench_setup
need_electrs
trap electrs_node_cleanup EXIT INT TERM

# cairn
CAIRN_LOG=warn "$CAIRN" --datadir "$WORK/cairn" import --quiet --blocks-dir "$CHAIN/blocks" >/dev/null
"$CAIRN" --datadir "$WORK/cairn" index-stats > "$WORK/stats.json" 2>/dev/null
cairn_bytes=$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["index_bytes"] - d["column_families"].get("undo", 0))' "$WORK/stats.json")

# bitcoind with both indexes, then electrs
mkdir -p "$WORK/electrs"
electrs_node 29160 29161 -txindex -blockfilterindex
until ! node_cli getindexinfo | grep -q '"synced": false'; do sleep 0.5; done
start_electrs "$WORK/node" 29161 29160 "$WORK/electrs" 29162
until electrum_at 29162 "$BLOCKS"; do sleep 0.5; done
kill "$ELECTRS_PID"; wait "$ELECTRS_PID" 2>/dev/null || true; ELECTRS_PID=""
node_cli stop >/dev/null; while [ -f "$WORK/node/regtest/bitcoind.pid" ]; do sleep 0.2; done
r=$WORK/node/regtest
electrs=$(disk "$WORK/electrs"); txindex=$(disk "$r/indexes/txindex"); filters=$(disk "$r/indexes/blockfilter")

other=$((electrs + txindex + filters))
echo "| chain | cairn index | electrs + txindex + blockfilterindex | cairn / other |"
echo "|---|---|---|---|"
awk -v c="$cairn_bytes" -v e="$electrs" -v t="$txindex" -v f="$filters" -v o="$other" -v b="$BLOCKS" -v x="$TXS" -v s="${SHAPE:-}${SIGNATURES:+ signatures=$SIGNATURES}" \
  'BEGIN { printf "| %s blocks x %s txs/block %s | %d | %d + %d + %d = %d | %.3fx |\n", b, x, s, c, e, t, f, o, c / o }'
echo "cairn per column family: $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["column_families"])' "$WORK/stats.json")"
commit=$(git describe --always --dirty 2>/dev/null || echo unknown)
json=$(results_file "index-size-$BLOCKS-$TXS")
cat > "$json" <<JSON
{"benchmark": "index-size", "command": "$BENCH_COMMAND", "commit": "$commit", "chain": "$CHAIN",
 "cairn": $cairn_bytes, "electrs": $electrs, "txindex": $txindex, "blockfilterindex": $filters,
 "ratio": $(awk -v c="$cairn_bytes" -v o="$other" 'BEGIN { printf "%.4f", c / o }')}
JSON
echo "written to $json"
