#!/bin/sh
# BIP157 serving: the time to hand a light client every filter of a generated chain in
# getcfilters batches of 1,000 blocks, from cairn and from a bitcoind with -blockfilterindex
# -peerblockfilters holding the same chain (cairn synced it from that bitcoind). The same
# client (contrib/bench/load/cfilters_client.rs) asks both, interleaved (A B A B ...), RUNS times each,
# one fresh connection per run; medians and the ratio are printed.
#
# Usage: contrib/bench/cfilters-serving.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS]
# Defaults: 2000 blocks, 53 txs per block (about 100k transactions), 5 runs.
# Uses the bitcoind of contrib/install-bitcoind.sh (installed when missing) or $CAIRN_BITCOIND.
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=${3:-5}
. contrib/bench/lib.sh
bench_setup --example cfilters_client
CLIENT="$EXAMPLES/cfilters_client"
rpc() { "$CLI" -regtest -datadir="$WORK/peer" -rpcport=29021 -rpcuser=u -rpcpassword=p "$@"; }
cleanup() {
  [ -n "${CAIRN_PID:-}" ] && kill "$CAIRN_PID" 2>/dev/null
  rpc stop >/dev/null 2>&1 || true
  sleep 2; rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
mkdir -p "$WORK/peer"
"$BITCOIND" -regtest -datadir="$WORK/peer" -port=29020 -bind=127.0.0.1 -rpcport=29021 -rpcuser=u -rpcpassword=p \
  $(loadblock_args) -blockfilterindex -peerblockfilters -daemon -printtoconsole=0 >/dev/null
until [ "$(rpc getblockcount 2>/dev/null || echo 0)" = "$BLOCKS" ] && rpc getindexinfo 2>/dev/null | grep -q '"synced": true'; do sleep 0.5; done
TIP=$(rpc getbestblockhash)
"$CAIRN" --datadir "$WORK/cairn" --admin-addr 127.0.0.1:0 --electrum-addr 127.0.0.1:0 --connect 127.0.0.1:29020 \
  --p2p-addr 127.0.0.1:29030 run >/dev/null 2>&1 &
CAIRN_PID=$!
until [ -f "$WORK/cairn/regtest/admin.addr" ]; do sleep 0.05; done
until "$CAIRN" --datadir "$WORK/cairn" status --json 2>/dev/null | grep -q "\"index_tip\":{\"height\":$BLOCKS,\"hash\":\"$TIP\""; do sleep 0.2; done
pass() { "$CLIENT" "$1" 1 | sed -n 's/.*"seconds": \[\([0-9.e-]*\)\].*/\1/p'; }
from_bitcoind() { pass 127.0.0.1:29020; }
from_cairn() { pass 127.0.0.1:29030; }
echo "filter bytes per pass: $("$CLIENT" 127.0.0.1:29030 1 | sed -n 's/.*"filter_bytes": \([0-9]*\).*/\1/p') (cairn), $("$CLIENT" 127.0.0.1:29020 1 | sed -n 's/.*"filter_bytes": \([0-9]*\).*/\1/p') (bitcoind)"
compare "bitcoind -peerblockfilters" from_bitcoind "cairn" from_cairn
