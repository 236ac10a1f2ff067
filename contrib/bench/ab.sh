#!/bin/sh
# Two builds of cairn side by side, for trying a lever: the same work done by binary A and
# binary B, interleaved (A B A B ...), RUNS times each; medians and B / A, with a JSON record.
#
# Usage:
#   contrib/bench/ab.sh import BIN_A BIN_B [BLOCKS] [TXS_PER_BLOCK] [RUNS]
#       `cairn import` of the chain with the index (wall seconds; with METRIC=cpu, the
#       process's CPU seconds, user and system, from /usr/bin/time: what a lever that takes work
#       off a thread running beside validation saves, which the wall clock of 2 cores hides).
#   contrib/bench/ab.sh reindex BIN_A BIN_B [BLOCKS] [TXS_PER_BLOCK] [RUNS]
#       `cairn reindex` of one kernel's blocks (validated once by B, not timed): the indexer
#       alone, nothing validated beside it (wall seconds; with METRIC=cpu, CPU seconds).
#   contrib/bench/ab.sh query BIN_A BIN_B [BLOCKS] [TXS_PER_BLOCK] [RUNS] [KIND] [REQUESTS]
#       each binary builds its own index once (so storage levers count), then serves it in
#       turn; contrib/bench/load/electrum_load.rs
#       replays REQUESTS (default 40) requests of KIND (default "get_history huge", see
#       electrum_load's mix) from one client; the median latency of each run is the sample
#       (with METRIC=cpu, the server's CPU seconds a request, user and system).
#   WALLET_ADDRESSES=1000 contrib/bench/ab.sh esplora BIN_A BIN_B [BLOCKS] [TXS_PER_BLOCK] [RUNS] [KIND] [REQUESTS]
#       one index (built by B) served by each binary in turn over HTTP; REQUESTS (default 40)
#       `GET /address/:a/txs` of the address with the largest history (KIND large, the default)
#       or of one with a small history (KIND small), after 20 untimed; the p50 of each run is
#       the sample (contrib/bench/address_txs.py). The chain must pay a wallet
#       (WALLET_ADDRESSES), as esplora.sh's does.
# Keep a copy of a build before changing the code: cp "$CARGO_TARGET_DIR/release/cairn" /tmp/a.
set -eu
cd "$(dirname "$0")/../.."
MODE=$1
BIN_A=$2
BIN_B=$3
BLOCKS=${4:-2000}
TXS=${5:-53}
RUNS=${6:-3}
KIND=${7:-get_history huge}
REQUESTS=${8:-40}
. contrib/bench/lib.sh
bench_setup --example electrum_load
# What is measured is the work, not the cost throttling (off, as for ElectrumX in lib.sh; set as
# variables, which a cairn without the options ignores).
export CAIRN_ELECTRUM_COST_SOFT_LIMIT=0 CAIRN_ELECTRUM_COST_HARD_LIMIT=0
trap 'kill "${PID:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT INT TERM
# timed COMMAND...: runs it and prints its wall seconds, or with METRIC=cpu its CPU seconds
# (user + system, every thread, from /usr/bin/time).
timed() {
  if [ "${METRIC:-wall}" = cpu ]; then
    /usr/bin/time -f '%U %S' -o "$WORK/cpu.txt" "$@" >/dev/null
    awk '{ printf "%.3f\n", $1 + $2 }' "$WORK/cpu.txt"
    return
  fi
  start=$(date +%s.%N)
  "$@" >/dev/null
  elapsed "$start" "$(date +%s.%N)"
}
import_with() {
  rm -rf "$WORK/d"
  timed "$1" --datadir "$WORK/d" import --quiet --blocks-dir "$CHAIN/blocks"
}
reindex_with() { timed "$1" --datadir "$WORK/k" reindex; }
query_with() { # $1 = binary, $2 = its datadir
  "$1" --datadir "$2" --admin-addr 127.0.0.1:0 --electrum-addr 127.0.0.1:29181 \
    --electrum-ws-addr 127.0.0.1:29182 --no-listen run >"$WORK/serve.log" 2>&1 &
  PID=$!
  until nc -z 127.0.0.1 29182 2>/dev/null; do sleep 0.2; done
  # The untimed check pass of electrum_load warms the cache; the timed run's p50 is the sample
  # (with METRIC=cpu, the server's CPU seconds, user and system, a request over both passes).
  ticks=$(awk '{ print $14 + $15 }' "/proc/$PID/stat")
  p50=$("$EXAMPLES/electrum_load" --chain "$CHAIN" --server "x=ws://127.0.0.1:29182" \
    --clients 1 --runs 1 --requests "$REQUESTS" --only "$KIND" 2>&1 | sed -n 's/^clients 1 run 1 x: .* p50 \([0-9.]*\) ms.*/\1/p')
  ticks=$(awk -v t="$ticks" '{ print $14 + $15 - t }' "/proc/$PID/stat")
  kill "$PID"; wait "$PID" 2>/dev/null || true
  if [ "${METRIC:-wall}" = cpu ]; then
    awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" -v n="$REQUESTS" 'BEGIN { printf "%.9f\n", t / hz / (2 * n) }'
    return
  fi
  awk -v ms="$p50" 'BEGIN { printf "%.6f\n", ms / 1000 }'
}
esplora_with() { # $1 = binary, $2 = its datadir
  "$1" --datadir "$2" --admin-addr 127.0.0.1:0 --electrum-addr 127.0.0.1:29181 \
    --http-addr 127.0.0.1:29183 --no-listen run >"$WORK/serve.log" 2>&1 &
  PID=$!
  until [ "$(curl -s http://127.0.0.1:29183/blocks/tip/height)" = "$BLOCKS" ]; do sleep 0.2; done
  p50=$(python3 contrib/bench/address_txs.py 29183 "$REQUESTS" p50 "$KIND")
  kill "$PID"; wait "$PID" 2>/dev/null || true
  echo "$p50"
}
case $MODE in
  import)
    a() { import_with "$BIN_A"; }
    b() { import_with "$BIN_B"; }
    compare "A: $BIN_A" a "B: $BIN_B" b ;;
  reindex)
    "$BIN_B" --datadir "$WORK/k" import --quiet --no-index --blocks-dir "$CHAIN/blocks" >/dev/null
    a() { reindex_with "$BIN_A"; }
    b() { reindex_with "$BIN_B"; }
    compare "A: $BIN_A (reindex)" a "B: $BIN_B (reindex)" b ;;
  query)
    "$BIN_A" --datadir "$WORK/qa" import --quiet --blocks-dir "$CHAIN/blocks" >/dev/null
    "$BIN_B" --datadir "$WORK/qb" import --quiet --blocks-dir "$CHAIN/blocks" >/dev/null
    a() { query_with "$BIN_A" "$WORK/qa"; }
    b() { query_with "$BIN_B" "$WORK/qb"; }
    what="$KIND p50"; [ "${METRIC:-wall}" = cpu ] && what="$KIND server CPU a request"
    compare "A: $BIN_A ($what)" a "B: $BIN_B ($what)" b ;;
  esplora)
    [ "$KIND" = "get_history huge" ] && KIND=large
    "$BIN_B" --datadir "$WORK/e" import --quiet --blocks-dir "$CHAIN/blocks" >/dev/null
    a() { esplora_with "$BIN_A" "$WORK/e"; }
    b() { esplora_with "$BIN_B" "$WORK/e"; }
    compare "A: $BIN_A (/address/:a/txs $KIND p50)" a "B: $BIN_B (/address/:a/txs $KIND p50)" b ;;
  *) echo "usage: $0 import|reindex|query|esplora BIN_A BIN_B [BLOCKS] [TXS_PER_BLOCK] [RUNS] [KIND] [REQUESTS]" >&2; exit 2 ;;
esac
