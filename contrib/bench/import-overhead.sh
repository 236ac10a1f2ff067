#!/bin/sh
# Index overhead: the same generated chain imported with bare kernel validation
# (`cairn import --no-index`) and with the index on, interleaved A B A B ..., RUNS times each.
# Prints every sample, the medians and the ratio, then the index size of the last indexed run.
#
# Usage: contrib/bench/import-overhead.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS] [filters]
# Defaults: 2000 blocks, 53 txs per block (about 100k transactions), 3 runs.
# With `filters` as the fourth argument it compares the index without BIP158 filters
# (`block_filters = false`) against the index with them instead: the sync cost of filters.
# The chain is generated once into ${CAIRN_BENCH_CACHE:-/var/tmp/cairn-bench}.
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=${3:-3}
MODE=${4:-overhead}
. contrib/bench/lib.sh
bench_setup
trap 'rm -rf "$WORK"' EXIT INT TERM
run() { # $1 = label, $2.. = extra import flags
  label=$1; shift
  rm -rf "$WORK/$label"
  start=$(date +%s.%N)
  "$CAIRN" --datadir "$WORK/$label" import --quiet --blocks-dir "$CHAIN/blocks" "$@" >/dev/null
  end=$(date +%s.%N)
  elapsed "$start" "$end"
}
bare() { run bare --no-index; }
indexed() { run indexed; }
if [ "$MODE" = filters ]; then
  printf 'block_filters = false\n' > "$WORK/no-filters.toml"
  nofilters() { run nofilters --config "$WORK/no-filters.toml"; }
  compare "index without filters" nofilters "index with filters" indexed
else
  compare "bare validation (--no-index)" bare "validation + index" indexed
fi
echo
"$CAIRN" --datadir "$WORK/indexed" index-stats
