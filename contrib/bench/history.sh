#!/bin/sh
# Long histories: one script with about a million history entries (`cairn generate
# --hot-per-mille 500` pays it half of all outputs), asked whole of ElectrumX 1.20 and of cairn
# over TCP, the servers taking turns (contrib/bench/load/history_load.rs): subscribe latency (the status
# of the whole history, then again on a new connection), get_history to the first byte and to
# the last, bytes per second for one client and for CLIENTS at once, and each server's RSS
# before and at its peak while the CLIENTS fetch it. The answers are compared before timing.
#
# Usage: contrib/bench/history.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS] [CLIENTS]
# Defaults: 1100 blocks of 1000 transactions (about a million), 3 runs, 10 clients.
# ElectrumX gets MAX_SEND 256 MB so that it answers a history this long at all (its default,
# 1 MB, refuses it); otherwise it runs as in contrib/bench/lib.sh.
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-1100}
TXS=${2:-1000}
RUNS=${3:-3}
CLIENTS=${4:-10}
. contrib/bench/lib.sh
HOT_PER_MILLE=500 bench_setup --example history_load
trap stack_cleanup EXIT INT TERM
EX_MAX_SEND=256000000 electrumx_stack tcp://127.0.0.1:29051
cairn_stack --electrum-addr 127.0.0.1:29061
echo "index build (one run each): ElectrumX from bitcoind's RPC ${EX_INDEX_SECONDS}s; cairn import ${CAIRN_INDEX_SECONDS}s"
"$EXAMPLES/history_load" --script "$(cut -d' ' -f1 "$CHAIN/busiest-script.txt")" \
  --server "ElectrumX=127.0.0.1:29051@$EX_PID" --server "cairn=127.0.0.1:29061@$CAIRN_PID" \
  --clients "$CLIENTS" --runs "$RUNS" --json "$(results_file "history-$BLOCKS-$TXS")" \
  --command "sh contrib/bench/history.sh $BLOCKS $TXS $RUNS $CLIENTS"
