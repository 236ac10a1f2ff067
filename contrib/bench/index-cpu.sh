#!/bin/sh
# The indexer's CPU against electrs 0.11.1's, per transaction, on one chain already validated:
#   cairn    `cairn reindex` of a kernel that holds the chain (`cairn import --no-index` once,
#            not timed): the index, its BIP158 filters and silent-payment tweaks built again from
#            the kernel's blocks and undo data, nothing validated beside it;
#   electrs  electrs 0.11.1 indexing a bitcoind that loaded the same blk files (-loadblock),
#            from an empty database until it answers blockchain.headers.subscribe with the tip
#            (its blocks come over P2P from bitcoind; bitcoind's CPU meanwhile is printed apart).
# Each side's CPU is the process's user + system time (every thread, as `perf stat`'s
# task-clock), read from /proc when it is done; RUNS rounds, interleaved, medians, cairn / electrs.
#
# Usage: contrib/bench/index-cpu.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS]
# Defaults: 2000 blocks, 53 txs per block, 3 runs. The issue's chains: `SHAPE=mainnet
# SIGNATURES=none` (S: 2000 53, M: 20000 53). Installs electrs (contrib/install-electrs.sh) if
# missing.
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=${3:-3}
. contrib/bench/lib.sh
bench_setup
need_electrs
trap electrs_node_cleanup EXIT INT TERM

# The kernel cairn reindexes, and a bitcoind holding the same chain for electrs.
CAIRN_LOG=warn "$CAIRN" --datadir "$WORK/k" import --no-index --quiet --blocks-dir "$CHAIN/blocks" >/dev/null
electrs_node 29170 29171
txs=$(node_cli getchaintxstats | python3 -c 'import json, sys; print(json.load(sys.stdin)["txcount"])')
BITCOIND_PID=$(cat "$WORK/node/regtest/bitcoind.pid")

cairn_run() {
  /usr/bin/time -f '%e %U %S' -o "$WORK/cairn.time" "$CAIRN" --datadir "$WORK/k" reindex >/dev/null 2>&1
  awk '{ printf "%.3f %.3f\n", $2 + $3, $1 }' "$WORK/cairn.time"
}
electrs_run() {
  rm -rf "$WORK/electrs"; mkdir -p "$WORK/electrs"
  node_before=$(cpu_of "$BITCOIND_PID")
  start=$(date +%s.%N)
  start_electrs "$WORK/node" 29171 29170 "$WORK/electrs" 29172
  until electrum_at 29172 "$BLOCKS"; do
    # electrs gone (a full disk, say): say why instead of waiting for ever.
    kill -0 "$ELECTRS_PID" 2>/dev/null || { tail -5 "$WORK/electrs.log" >&2; return 1; }
    sleep 0.5
  done
  wall=$(elapsed "$start" "$(date +%s.%N)")
  cpu=$(cpu_of "$ELECTRS_PID")
  node=$(awk -v a="$node_before" -v b="$(cpu_of "$BITCOIND_PID")" 'BEGIN { printf "%.3f", b - a }')
  kill "$ELECTRS_PID"; wait "$ELECTRS_PID" 2>/dev/null || true; ELECTRS_PID=""
  echo "$cpu $wall $node"
}

: > "$WORK/cairn.txt"; : > "$WORK/electrs.txt"
i=1
while [ "$i" -le "$RUNS" ]; do
  c=$(cairn_run); echo "run $i cairn reindex: CPU, wall s: $c"; echo "$c" >> "$WORK/cairn.txt"
  e=$(electrs_run) || { echo "run $i electrs: it stopped before answering the tip"; exit 1; }
  echo "run $i electrs: CPU, wall, bitcoind CPU s: $e"; echo "$e" >> "$WORK/electrs.txt"
  i=$((i + 1))
done
cc=$(cut -d' ' -f1 "$WORK/cairn.txt" | median); cw=$(cut -d' ' -f2 "$WORK/cairn.txt" | median)
ec=$(cut -d' ' -f1 "$WORK/electrs.txt" | median); ew=$(cut -d' ' -f2 "$WORK/electrs.txt" | median)
en=$(cut -d' ' -f3 "$WORK/electrs.txt" | median)
echo
echo "| chain | txs | cairn reindex CPU (wall) | electrs CPU (wall) | CPU per tx cairn, electrs | cairn / electrs |"
echo "|---|---|---|---|---|---|"
awk -v b="$BLOCKS" -v x="$TXS" -v s="${SHAPE:-}${SIGNATURES:+ signatures=$SIGNATURES}" -v n="$txs" \
  -v cc="$cc" -v cw="$cw" -v ec="$ec" -v ew="$ew" \
  'BEGIN { printf "| %s blocks x %s txs/block %s | %d | %.2f s (%.2f s) | %.2f s (%.2f s) | %.2f µs, %.2f µs | **%.2fx** |\n",
           b, x, s, n, cc, cw, ec, ew, cc / n * 1e6, ec / n * 1e6, cc / ec }'
echo "bitcoind's CPU while electrs indexed (serving it blocks; median): $en s"
commit=$(git describe --always --dirty 2>/dev/null || echo unknown)
json=$(results_file "index-cpu-$BLOCKS-$TXS")
cat > "$json" <<JSON
{"benchmark": "index-cpu", "command": "$BENCH_COMMAND", "commit": "$commit", "chain": "$CHAIN", "txs": $txs,
 "cairn": {"cpu_s": [$(cut -d' ' -f1 "$WORK/cairn.txt" | paste -sd,)], "wall_s": [$(cut -d' ' -f2 "$WORK/cairn.txt" | paste -sd,)]},
 "electrs": {"cpu_s": [$(cut -d' ' -f1 "$WORK/electrs.txt" | paste -sd,)], "wall_s": [$(cut -d' ' -f2 "$WORK/electrs.txt" | paste -sd,)],
             "bitcoind_cpu_s": [$(cut -d' ' -f3 "$WORK/electrs.txt" | paste -sd,)]},
 "ratio_cpu": $(awk -v a="$cc" -v b="$ec" 'BEGIN { printf "%.4f", a / b }')}
JSON
echo "written to $json"
