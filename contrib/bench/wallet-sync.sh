#!/bin/sh
# Wallet sync: BDK (bdk_wallet 2 + bdk_electrum 0.24, the client in contrib/bench/wallet-sync)
# restoring a wallet of WALLET_ADDRESSES receive addresses from its descriptors with a full scan,
# against ElectrumX 1.20 (or, with BASELINE=fulcrum, Fulcrum 2.1.1) and cairn serving the same
# generated chain (`cairn generate
# --wallet-addresses`: the wallet gets 2% of all outputs and spends them like everyone else),
# over TCP, the two servers taking turns (A B A B ...), RUNS times each, every run a fresh wallet
# and connection. Every run must find the transactions the generator wrote, and all runs the
# same balance. Prints the medians and the ratio, and the CPU each server (the baseline with its
# bitcoind) and the client used a scan, and writes every sample to a JSON file.
#
# Usage: contrib/bench/wallet-sync.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS] [WALLET_ADDRESSES]
# Defaults: 2000 blocks, 53 txs per block, 3 runs, 1000 addresses (about 10k wallet txs).
# WALLET_PER_MILLE=N pays the wallet N outputs per thousand instead of 20: on chain M (20000
# blocks) the default gives it 77,596 transactions, which bdk_electrum 0.24 cannot restore in
# 24 GiB (contrib/bench/README.md); WALLET_PER_MILLE=2 gives it 13,387.
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
BASE_PIDS="${EX_PID:-} ${FULCRUM_PID:-} $(cat "$WORK/node/regtest/bitcoind.pid")"
# sync_with SIDE URL PID...: one scan (its seconds on stdout); the CPU the server's processes
# and the client used for it is appended to $WORK/cpu-SIDE.txt ("server client").
sync_with() {
  side=$1 url=$2; shift 2
  before=$(cpu_of "$@")
  /usr/bin/time -f "%U %S" -o "$WORK/client-cpu.txt" \
    "$CLIENT" --descriptors "$CHAIN/wallet.txt" --server "$url" --found "$WORK/found.txt"
  after=$(cpu_of "$@")
  awk -v a="$after" -v b="$before" '{printf "%.2f %.2f\n", a - b, $1 + $2}' "$WORK/client-cpu.txt" >> "$WORK/cpu-$side.txt"
}
# The baseline's server CPU counts its bitcoind too (transactions are read from it).
from_baseline() { sync_with base tcp://127.0.0.1:29051 $BASE_PIDS; }
from_cairn() { sync_with cairn tcp://127.0.0.1:29061 "$CAIRN_PID"; }
cpu_median() { awk -v c="$2" '{print $c}' "$WORK/cpu-$1.txt" | median; }
bench_extra() {
  printf '{"server_cpu_seconds": {"a_median": %s, "b_median": %s}, "client_cpu_seconds": {"a_median": %s, "b_median": %s}}' \
    "$(cpu_median base 1)" "$(cpu_median cairn 1)" "$(cpu_median base 2)" "$(cpu_median cairn 2)"
}
compare "$BASE_NAME" from_baseline "cairn" from_cairn
echo "CPU a scan (medians): server $BASE_NAME (with its bitcoind) $(cpu_median base 1) s, cairn $(cpu_median cairn 1) s;" \
  "the client $(cpu_median base 2) s against $BASE_NAME, $(cpu_median cairn 2) s against cairn"
found=$(sort -u "$WORK/found.txt")
if [ "$(echo "$found" | wc -l)" -ne 1 ] || [ "${found%% *}" != "$WALLET_TXS" ]; then
  echo "SERVERS DISAGREE or miss transactions (txs balance receive-index, generator: $WALLET_TXS txs):"
  echo "$found"
  exit 1
fi
echo "every run of every server found the same $WALLET_TXS transactions and balance (txs balance receive-index: $found)"
