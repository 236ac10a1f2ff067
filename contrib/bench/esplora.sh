#!/bin/sh
# The Esplora API: BDK restoring a wallet with a full scan over cairn's Esplora API
# (bdk_esplora) against the same scan over cairn's Electrum server (bdk_electrum), both from one
# cairn on a generated chain that pays a wallet (`cairn generate --wallet-addresses`), the two
# taking turns (A B A B ...), RUNS times each, every run a fresh wallet; every run must find the
# transactions the generator wrote and all the same balance. Then the latency of
# `GET /address/:address/txs` (mempool, then the 25 newest confirmed transactions) for an address
# with a small history and for the one paid most often (the largest histories): REQUESTS
# requests each over one keep-alive connection, p50 and p99.
#
# Usage: contrib/bench/esplora.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS] [WALLET_ADDRESSES] [REQUESTS]
# Defaults: 2000 blocks, 53 txs per block, 3 runs, 1000 addresses, 200 requests.
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=${3:-3}
WALLET_ADDRESSES=${4:-1000}
REQUESTS=${5:-200}
. contrib/bench/lib.sh
bench_setup
wallet_sync_client
trap stack_cleanup EXIT INT TERM
cairn_stack --electrum-addr 127.0.0.1:29061 --http-addr 127.0.0.1:29063
until [ "$(curl -s http://127.0.0.1:29063/blocks/tip/height)" = "$BLOCKS" ]; do sleep 0.2; done
WALLET_TXS=$(sed -n 's/^# The wallet this chain pays ([0-9]* receive addresses, \([0-9]*\) transactions).*/\1/p' "$CHAIN/wallet.txt")
sync_with() { "$CLIENT" --descriptors "$CHAIN/wallet.txt" --server "$1" --found "$WORK/found.txt"; }
over_electrum() { sync_with tcp://127.0.0.1:29061; }
over_esplora() { sync_with http://127.0.0.1:29063; }
compare "BDK over Electrum (bdk_electrum)" over_electrum "BDK over Esplora (bdk_esplora)" over_esplora
found=$(sort -u "$WORK/found.txt")
if [ "$(echo "$found" | wc -l)" -ne 1 ] || [ "${found%% *}" != "$WALLET_TXS" ]; then
  echo "THE SCANS DISAGREE or miss transactions (txs balance receive-index, generator: $WALLET_TXS txs):"
  echo "$found"
  exit 1
fi
echo "every scan found the same $WALLET_TXS transactions and balance (txs balance receive-index: $found)"
echo
python3 contrib/bench/address_txs.py 29063 "$REQUESTS" table
