#!/bin/sh
# Queries: ElectrumX 1.20 and cairn serving the same generated chain, both over WebSocket (no
# TCP padding on ElectrumX's side, see ../shared/REFERENCE-STACK.md), loaded by the same client
# (contrib/bench/load/electrum_load.rs) with the same request mix at 1, 10 and 100 concurrent clients, the
# two servers taking turns (A B A B ...), RUNS times each. Before timing, every request goes to
# both and the answers are compared. Prints the medians and ratios as markdown tables and writes
# every sample to a JSON file (the path is printed last).
#
# Usage: contrib/bench/queries.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS] [REQUESTS_PER_RUN]
# Defaults: 2000 blocks, 53 txs per block (about 100k transactions), 3 runs, 2000 requests.
# Installs what it needs when missing: bitcoind (contrib/install-bitcoind.sh; ElectrumX reads
# the chain from it over RPC) and ElectrumX (contrib/install-electrumx.sh). How ElectrumX is configured:
# electrumx_stack in contrib/bench/lib.sh.
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=${3:-3}
REQUESTS=${4:-2000}
. contrib/bench/lib.sh
bench_setup --example electrum_load
trap stack_cleanup EXIT INT TERM
electrumx_stack ws://127.0.0.1:29052
cairn_stack --electrum-ws-addr 127.0.0.1:29062 --electrum-addr 127.0.0.1:29061
echo "index build (one run each, not interleaved): ElectrumX from bitcoind's RPC ${EX_INDEX_SECONDS}s; cairn import (validation + index + filters) ${CAIRN_INDEX_SECONDS}s"
queries_against ElectrumX ws://127.0.0.1:29052
