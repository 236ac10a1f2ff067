#!/bin/sh
# Wallet sync: BDK (bdk_wallet 2 + bdk_electrum 0.24, the client in contrib/bench/wallet-sync)
# restoring a wallet of WALLET_ADDRESSES receive addresses from its descriptors with a full scan,
# against ElectrumX 1.20 and cairn serving the same generated chain (`cairn generate
# --wallet-addresses`: the wallet gets 2% of all outputs and spends them like everyone else),
# over TCP, the two servers taking turns (A B A B ...), RUNS times each, every run a fresh wallet
# and connection. Both must find the same transactions and balance. Prints the medians and the
# ratio and writes every sample to a JSON file.
#
# Usage: contrib/bench/wallet-sync.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS] [WALLET_ADDRESSES]
# Defaults: 2000 blocks, 53 txs per block, 3 runs, 1000 addresses (about 10k wallet txs).
# Needs bitcoind (contrib/install-bitcoind.sh) and ElectrumX (contrib/install-electrumx.sh, run
# here when missing); ElectrumX's configuration: electrumx_stack in contrib/bench/lib.sh.
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=${3:-3}
WALLET_ADDRESSES=${4:-1000}
. contrib/bench/lib.sh
bench_setup
(cd contrib/bench/wallet-sync && CARGO_TARGET_DIR=${CAIRN_WALLET_SYNC_TARGET:-/var/tmp/cairn-wallet-sync-target} \
  cargo build --release --locked >/dev/null 2>&1)
CLIENT=${CAIRN_WALLET_SYNC_TARGET:-/var/tmp/cairn-wallet-sync-target}/release/cairn-wallet-sync
trap stack_cleanup EXIT INT TERM
electrumx_stack tcp://127.0.0.1:29051
cairn_stack --electrum-addr 127.0.0.1:29061
echo "the generator says: $(sed -n 's/^# The wallet this chain pays (\(.*\)), BIP84.*/\1/p' "$CHAIN/wallet.txt")"
"$CLIENT" --descriptors "$CHAIN/wallet.txt" --server "ElectrumX=tcp://127.0.0.1:29051" --server "cairn=tcp://127.0.0.1:29061" \
  --runs "$RUNS" --json "$(results_file "wallet-sync-$BLOCKS-$TXS-$WALLET_ADDRESSES")" \
  --command "sh contrib/bench/wallet-sync.sh $BLOCKS $TXS $RUNS $WALLET_ADDRESSES"
