#!/bin/sh
# Index overhead: the same generated chain imported with bare kernel validation
# (`cairn import --no-index`) and with the index on, interleaved A B A B ..., RUNS times each.
# Prints every sample, the medians and the ratio, then the index size of the last indexed run.
#
# Usage: contrib/bench/import-overhead.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS]
# Defaults: 2000 blocks, 53 txs per block (about 100k transactions), 3 runs.
# The chain is generated once into ${CAIRN_BENCH_CACHE:-/var/tmp/cairn-bench}.
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=${3:-3}
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/cairn-target}"
cargo build --release --locked --bin cairn >/dev/null 2>&1
CAIRN="$CARGO_TARGET_DIR/release/cairn"
CACHE=${CAIRN_BENCH_CACHE:-/var/tmp/cairn-bench}
CHAIN="$CACHE/chain-$BLOCKS-$TXS-seed1"
if [ ! -f "$CHAIN/blocks.hex" ]; then
  "$CAIRN" generate --blocks "$BLOCKS" --txs-per-block "$TXS" --seed 1 --out "$CHAIN"
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT INT TERM
run() { # $1 = label, $2.. = extra import flags
  label=$1; shift
  rm -rf "$WORK/$label"
  start=$(date +%s.%N)
  "$CAIRN" --datadir "$WORK/$label" import --quiet --blocks-dir "$CHAIN/blocks" "$@" >/dev/null
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f\n", e - s }' 
}
median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
: > "$WORK/a.txt"; : > "$WORK/b.txt"
i=1
while [ "$i" -le "$RUNS" ]; do
  a=$(run bare --no-index); echo "run $i  bare validation (--no-index): ${a}s"; echo "$a" >> "$WORK/a.txt"
  b=$(run indexed);         echo "run $i  validation + index:         ${b}s"; echo "$b" >> "$WORK/b.txt"
  i=$((i + 1))
done
ma=$(median < "$WORK/a.txt"); mb=$(median < "$WORK/b.txt")
echo
echo "| chain | bare validation (median) | with index (median) | ratio |"
echo "|---|---|---|---|"
printf '| %s blocks x %s txs/block | %.2f s | %.2f s | %.3fx |\n' "$BLOCKS" "$TXS" "$ma" "$mb" "$(awk -v a="$ma" -v b="$mb" 'BEGIN { print b / a }')"
echo
"$CAIRN" --datadir "$WORK/indexed" index-stats
echo "machine: $(nproc) cores, $(free -g | awk '/Mem/ {print $2}') GiB; commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
