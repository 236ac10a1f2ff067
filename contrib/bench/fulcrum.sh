#!/bin/sh
# Queries against Fulcrum 2.1.1, the fastest Electrum server: Fulcrum (the baseline) and cairn
# serving the same generated chain over WebSocket, loaded by the same client
# (contrib/bench/load/electrum_load.rs) with the same request mix at 1, 10 and 100 concurrent
# clients, taking turns (A B A B ...), RUNS times each. Before timing, every request goes to both
# and the answers are compared. Prints the medians and ratios (cairn / Fulcrum) as markdown
# tables and writes every sample to a JSON file (the path is printed last).
#
# Usage: contrib/bench/fulcrum.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS] [REQUESTS_PER_RUN]
# Defaults: 2000 blocks, 53 txs per block (about 100k transactions), 3 runs, 2000 requests.
# Installs what it needs when missing: bitcoind (Fulcrum reads the chain from it over RPC, with
# -txindex) and Fulcrum (contrib/install-fulcrum.sh: built from source with Debian's Qt and
# RocksDB, about 6 minutes). How Fulcrum is configured: fulcrum_stack in contrib/bench/lib.sh.
# Ends with each side's peak memory and disk.
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=${3:-3}
REQUESTS=${4:-2000}
. contrib/bench/lib.sh
bench_setup --example electrum_load
trap stack_cleanup EXIT INT TERM
fulcrum_stack 127.0.0.1:29072
cairn_stack --electrum-ws-addr 127.0.0.1:29062 --electrum-addr 127.0.0.1:29061
echo "index build (one run each, not interleaved): Fulcrum from bitcoind's RPC ${FULCRUM_INDEX_SECONDS}s; cairn import (validation + index + filters) ${CAIRN_INDEX_SECONDS}s"
queries_against Fulcrum ws://127.0.0.1:29072
# What each side holds once the load is over: peak resident memory (VmHWM) of each process, and
# the disk (apparent sizes, `disk` in lib.sh): Fulcrum's database beside its bitcoind's blocks,
# chainstate and -txindex; cairn's index beside its kernel's blocks and chainstate.
hwm() { awk '/^VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo "?"; }
node_pid=$(cat "$WORK/node/regtest/bitcoind.pid" 2>/dev/null || echo 0)
echo "peak RSS (MiB): Fulcrum $(hwm "$FULCRUM_PID") + its bitcoind $(hwm "$node_pid"); cairn $(hwm "$CAIRN_PID")"
r=$WORK/node/regtest
c=$WORK/cairn/regtest
echo "disk (bytes): Fulcrum $(disk "$WORK/fulcrum") + bitcoind blocks $(disk "$r/blocks") chainstate $(disk "$r/chainstate") txindex $(disk "$r/indexes") = $(disk "$WORK/fulcrum" "$r/blocks" "$r/chainstate" "$r/indexes"); cairn index $(disk "$c/index") + kernel blocks $(disk "$c/kernel/blocks") chainstate $(disk "$c/kernel/chainstate") = $(disk "$c")"
