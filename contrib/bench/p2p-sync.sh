#!/bin/sh
# P2P sync: cairn syncing a generated chain from a local bitcoind, against a second bitcoind
# with -txindex -blockfilterindex syncing the same chain from the same peer. The two sides run
# interleaved (A B A B ...), RUNS times each; medians and the ratio are printed.
#
# Usage: contrib/bench/p2p-sync.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS]
# Defaults: 2000 blocks, 53 txs per block (about 100k transactions), 3 runs.
# Uses the bitcoind of contrib/install-bitcoind.sh (installed when missing) or $CAIRN_BITCOIND.
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=${3:-3}
. contrib/bench/lib.sh
bench_setup
cleanup() {
  "$CLI" -regtest -datadir="$WORK/peer" -rpcport=29001 -rpcuser=u -rpcpassword=p stop >/dev/null 2>&1 || true
  "$CLI" -regtest -datadir="$WORK/b" -rpcport=29011 -rpcuser=u -rpcpassword=p stop >/dev/null 2>&1 || true
  sleep 2; rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
now() { date +%s.%N; }
# The peer: a bitcoind holding the chain.
peer_stack 29000 29001
TIP=$("$CLI" -regtest -datadir="$WORK/peer" -rpcport=29001 -rpcuser=u -rpcpassword=p getbestblockhash)
run_cairn() {
  rm -rf "$WORK/cairn"
  start=$(now)
  "$CAIRN" --datadir "$WORK/cairn" --admin-addr 127.0.0.1:0 --electrum-addr 127.0.0.1:0 --connect 127.0.0.1:29000 run >/dev/null 2>&1 &
  pid=$!
  until [ -f "$WORK/cairn/regtest/admin.addr" ]; do sleep 0.05; done
  until "$CAIRN" --datadir "$WORK/cairn" status --json 2>/dev/null | grep -q "\"index_tip\":{\"height\":$BLOCKS,\"hash\":\"$TIP\""; do sleep 0.2; done
  end=$(now)
  kill "$pid"; wait "$pid" 2>/dev/null || true
  elapsed "$start" "$end"
}
run_bitcoind() {
  rm -rf "$WORK/b"; mkdir -p "$WORK/b"
  start=$(now)
  "$BITCOIND" -regtest -datadir="$WORK/b" -port=29010 -bind=127.0.0.1 -rpcport=29011 -rpcuser=u -rpcpassword=p \
    -connect=127.0.0.1:29000 -txindex -blockfilterindex -daemon -printtoconsole=0 >/dev/null
  until [ "$("$CLI" -regtest -datadir="$WORK/b" -rpcport=29011 -rpcuser=u -rpcpassword=p getblockcount 2>/dev/null || echo 0)" = "$BLOCKS" ] &&
        "$CLI" -regtest -datadir="$WORK/b" -rpcport=29011 -rpcuser=u -rpcpassword=p getindexinfo 2>/dev/null | grep -c '"synced": true' | grep -q 2; do sleep 0.2; done
  end=$(now)
  "$CLI" -regtest -datadir="$WORK/b" -rpcport=29011 -rpcuser=u -rpcpassword=p stop >/dev/null
  while [ -f "$WORK/b/regtest/bitcoind.pid" ]; do sleep 0.2; done
  elapsed "$start" "$end"
}
compare "bitcoind -txindex -blockfilterindex" run_bitcoind "cairn (validate + index + serve)" run_cairn
