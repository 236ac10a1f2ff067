#!/bin/sh
# The indexer alone against validation alone: `cairn reindex` (the index rebuilt from the
# kernel's stored blocks and undo data, nothing validated) against `cairn import --no-index`
# (bare kernel validation of the same chain), interleaved A B A B ..., RUNS times each. The ratio
# is reindex / validation: at most 0.33 means the indexer is at least 3x as fast as validation,
# so it is never the bottleneck of a sync. On mainnet the kernel skips script checks below its
# assume-valid block, so validation there is cheaper than on regtest and this ratio larger.
#
# Usage: contrib/bench/reindex.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS]
# Defaults: 2000 blocks, 53 txs per block (about 100k transactions), 3 runs.
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=${3:-3}
. contrib/bench/lib.sh
bench_setup
trap 'rm -rf "$WORK"' EXIT INT TERM
# The kernel the reindex runs reads from: validated once, not timed.
"$CAIRN" --datadir "$WORK/kernel" import --quiet --no-index --blocks-dir "$CHAIN/blocks" >/dev/null
validate() {
  rm -rf "$WORK/bare"
  start=$(date +%s.%N)
  "$CAIRN" --datadir "$WORK/bare" import --quiet --no-index --blocks-dir "$CHAIN/blocks" >/dev/null
  elapsed "$start" "$(date +%s.%N)"
}
reindex() { # wall time, as for validation: both pay for starting and opening the kernel
  start=$(date +%s.%N)
  "$CAIRN" --datadir "$WORK/kernel" reindex --json > "$WORK/reindex.json"
  elapsed "$start" "$(date +%s.%N)"
}
bench_extra() { cat "$WORK/reindex.json"; }
compare "validation alone (import --no-index)" validate "indexer alone (reindex)" reindex
echo
echo "last reindex: $(cat "$WORK/reindex.json")"
