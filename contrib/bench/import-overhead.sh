#!/bin/sh
# Index overhead: the same generated chain imported with bare kernel validation
# (`cairn import --no-index`) and with the index on, interleaved A B A B ..., RUNS times each.
# Prints every sample, the medians and the ratio, blocks/s, txs/s and peak RSS of each side
# (medians; RSS needs /usr/bin/time, Debian package `time`), then the index size of the last
# indexed run.
#
# Usage: contrib/bench/import-overhead.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS] [filters]
# Defaults: 2000 blocks, 53 txs per block (about 100k transactions), 3 runs.
# With `filters` as the fourth argument it compares the index without BIP158 filters
# (`block_filters = false`) against the index with them instead: the sync cost of filters.
# With `silent` it compares the index without silent-payment tweaks (the default) against the
# index with them (`silent_payments = true`): the sync cost of BIP352 tweaks.
# With `cores` it compares the indexed import pinned to one core (`taskset -c 0`) against the
# same on both cores; `cores-bare` the same for bare validation: 1 to 2 core scaling.
# With `neighbour` it compares bare validation alone against bare validation beside a busy loop
# in another process at the lowest CPU priority (SCHED_IDLE, `chrt -i 0`): what any work on the
# second core costs validation on this machine, whatever its priority.
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
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f %M -o "$WORK/rss.txt" "$CAIRN" --datadir "$WORK/$label" import --quiet --blocks-dir "$CHAIN/blocks" "$@" >/dev/null
    cat "$WORK/rss.txt" >> "$WORK/rss-$label.txt"
  else
    "$CAIRN" --datadir "$WORK/$label" import --quiet --blocks-dir "$CHAIN/blocks" "$@" >/dev/null
  fi
  end=$(date +%s.%N)
  elapsed "$start" "$end"
}
bare() { run bare --no-index; }
indexed() { run indexed; }
# Throughput and peak memory of each side, recorded with the samples.
side_stats() { # $1 = label, $2 = median seconds
  rss=$( [ -s "$WORK/rss-$1.txt" ] && median < "$WORK/rss-$1.txt" || echo 0)
  awk -v b="$BLOCKS" -v t="$TXS_TOTAL" -v s="$2" -v r="$rss" -v l="$1" \
    'BEGIN { printf "{\"side\": \"%s\", \"blocks_per_s\": %.1f, \"txs_per_s\": %.0f, \"peak_rss_mib\": %.0f}\n", l, b / s, t / s, r / 1024 }'
}
# The side compared against the indexed one.
first_side() {
  case "$MODE" in filters) echo nofilters ;; silent) echo notweaks ;; *) echo bare ;; esac
}
bench_extra() {
  # With tweaks on (opened without them, the index would mark them off).
  if [ "$MODE" = silent ]; then set -- --config "$WORK/tweaks.toml"; else set --; fi
  "$CAIRN" --datadir "$WORK/indexed" "$@" index-stats > "$WORK/stats.json"
  TXS_TOTAL=$(sed -n 's/^  "txs": *\([0-9]*\).*/\1/p' "$WORK/stats.json")
  first=$(first_side)
  printf '{"sides": [%s, %s], "index_stats": %s}' "$(side_stats "$first" "$ma")" "$(side_stats indexed "$mb")" "$(cat "$WORK/stats.json")"
}
if [ "$MODE" = neighbour ]; then
  beside_spinner() {
    chrt -i 0 sh -c 'while :; do :; done' >/dev/null 2>&1 &
    spinner=$!
    run bare --no-index
    kill "$spinner"; wait "$spinner" 2>/dev/null || true
  }
  unset -f bench_extra
  compare "bare validation" bare "bare validation beside a SCHED_IDLE busy loop" beside_spinner
  exit 0
elif [ "$MODE" = cores ] || [ "$MODE" = cores-bare ]; then
  # The same import pinned to the first core, then on both: how sync time scales from 1 to 2
  # cores (the kernel's script-check thread, the indexer and its rayon pool, RocksDB's
  # background threads all share what they are given).
  flags=""; [ "$MODE" = cores-bare ] && flags=--no-index
  one() {
    rm -rf "$WORK/one"
    start=$(date +%s.%N)
    taskset -c 0 "$CAIRN" --datadir "$WORK/one" import --quiet --blocks-dir "$CHAIN/blocks" $flags >/dev/null
    elapsed "$start" "$(date +%s.%N)"
  }
  two() { run two $flags; }
  unset -f bench_extra
  compare "one core (taskset -c 0)${flags:+ $flags}" one "two cores${flags:+ $flags}" two
  exit 0
elif [ "$MODE" = filters ]; then
  printf 'block_filters = false\n' > "$WORK/no-filters.toml"
  nofilters() { run nofilters --config "$WORK/no-filters.toml"; }
  compare "index without filters" nofilters "index with filters" indexed
elif [ "$MODE" = silent ]; then
  printf 'silent_payments = true\n' > "$WORK/tweaks.toml"
  notweaks() { run notweaks; }
  indexed() { run indexed --config "$WORK/tweaks.toml"; }
  compare "index without tweaks" notweaks "index with silent-payment tweaks" indexed
else
  compare "bare validation (--no-index)" bare "validation + index" indexed
fi
echo
TXS_TOTAL=$(sed -n 's/^  "txs": *\([0-9]*\).*/\1/p' "$WORK/stats.json")
first=$(first_side)
echo "| side (medians) | blocks/s | txs/s | peak RSS |"
echo "|---|---|---|---|"
for side in "$first $ma" "indexed $mb"; do
  side_stats $side | sed 's/[{}"]//g; s/side: //; s/, [a-z_]*: / | /g; s/^/| /; s/$/ MiB |/'
done
echo
cat "$WORK/stats.json"
