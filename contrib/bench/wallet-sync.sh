#!/bin/sh
# Wallet sync: BDK (bdk_wallet 2 + bdk_electrum 0.24, the client in contrib/bench/wallet-sync)
# restoring a wallet of WALLET_ADDRESSES receive addresses from its descriptors with a full scan,
# against ElectrumX 1.20 (or, with BASELINE=fulcrum, Fulcrum 2.1.1) and cairn serving the same
# generated chain (`cairn generate
# --wallet-addresses`: the wallet gets 2% of all outputs and spends them like everyone else),
# over TCP, the two servers taking turns (A B A B ...), RUNS times each, every run a fresh wallet
# and connection. Every run must find the transactions the generator wrote, and all runs the
# same balance. Prints the medians and the ratio and writes every sample to a JSON file.
#
# Usage: contrib/bench/wallet-sync.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS] [WALLET_ADDRESSES]
# Defaults: 2000 blocks, 53 txs per block, 3 runs, 1000 addresses (about 10k wallet txs).
# WALLET_PER_MILLE=N pays the wallet N outputs per thousand instead of 20: on chain M (20000
# blocks) the default gives it 77,596 transactions, which bdk_electrum 0.24 cannot restore in
# 24 GiB (contrib/bench/README.md); WALLET_PER_MILLE=2 gives it about a tenth.
# Installs what it needs when missing (bitcoind, ElectrumX or Fulcrum); their configurations:
# electrumx_stack and fulcrum_stack in contrib/bench/lib.sh.
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=${3:-3}
WALLET_ADDRESSES=${4:-1000}
. contrib/bench/lib.sh
bench_setup
wallet_sync_client
trap stack_cleanup EXIT INT TERM
case "${BASELINE:-electrumx}" in
  electrumx) BASE_NAME=ElectrumX; electrumx_stack tcp://127.0.0.1:29051 ;;
  fulcrum) BASE_NAME=Fulcrum; fulcrum_stack 127.0.0.1:29052 127.0.0.1:29051 ;;
  *) echo "BASELINE is electrumx or fulcrum"; exit 1 ;;
esac
cairn_stack --electrum-addr 127.0.0.1:29061
WALLET_TXS=$(sed -n 's/^# The wallet this chain pays ([0-9]* receive addresses, \([0-9]*\) transactions).*/\1/p' "$CHAIN/wallet.txt")
echo "the generator wrote $WALLET_TXS wallet transactions"
sync_with() { "$CLIENT" --descriptors "$CHAIN/wallet.txt" --server "$1" --found "$WORK/found.txt"; }
from_baseline() { sync_with tcp://127.0.0.1:29051; }
from_cairn() { sync_with tcp://127.0.0.1:29061; }
compare "$BASE_NAME" from_baseline "cairn" from_cairn
found=$(sort -u "$WORK/found.txt")
if [ "$(echo "$found" | wc -l)" -ne 1 ] || [ "${found%% *}" != "$WALLET_TXS" ]; then
  echo "SERVERS DISAGREE or miss transactions (txs balance receive-index, generator: $WALLET_TXS txs):"
  echo "$found"
  exit 1
fi
echo "every run of every server found the same $WALLET_TXS transactions and balance (txs balance receive-index: $found)"
