#!/bin/sh
# Flame graphs of both sides of the index-overhead comparison: `perf record` (DWARF call
# graphs, 250 samples/s per thread) of bare validation (`cairn import --no-index`) and of
# validation + index (`cairn import`) on the same generated chain, drawn with inferno into
# contrib/bench/flamegraphs/import-{bare,indexed}-BLOCKS-TXS[-SHAPE][-nosig].svg (frames narrower than
# a pixel left out, to keep the files small), with a table of the share of samples per thread
# kind (the kernel's validating, script-check and prevout-fetching threads, the indexer and its
# rayon pool, RocksDB's background threads).
#
# Usage: contrib/bench/flamegraph.sh [BLOCKS] [TXS_PER_BLOCK]   (SHAPE=mainnet, SIGNATURES=none as elsewhere)
# Installs perf (Debian package linux-perf) and inferno (cargo, into /opt/inferno) if missing.
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=1
. contrib/bench/lib.sh
bench_setup
trap 'rm -rf "$WORK"' EXIT INT TERM
command -v perf >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null
INFERNO=${INFERNO:-/opt/inferno}
[ -x "$INFERNO/bin/inferno-flamegraph" ] ||
  CARGO_TARGET_DIR=/var/tmp/inferno-target cargo install inferno --version 0.12.8 --locked --root "$INFERNO" >/dev/null 2>&1
OUT=contrib/bench/flamegraphs
mkdir -p "$OUT"
SUFFIX="$BLOCKS-$TXS${SHAPE:+-$SHAPE}"; [ "${SIGNATURES:-all}" = none ] && SUFFIX="$SUFFIX-nosig"
# Thread names: the kernel's script checkers are b-scriptch.N and its prevout fetchers
# b-prevout.N; the validating thread is the main one (named after the binary); rayon's pool
# threads, which prepare the indexer's rows, are started by the indexer thread and carry its name.
thread_kind() {
  awk '{ n = $1
         if (n ~ /^b-scriptch/) k = "script checks"
         else if (n ~ /^b-prevout/) k = "prevout fetching (kernel)"
         else if (n == "cairn") k = "validation (main thread)"
         else if (n == "indexer") k = "indexer"
         else if (n ~ /^rocksdb/) k = "RocksDB background"
         else k = "other (" n ")"
         s[k] += $2; t += $2 }
       END { for (k in s) printf "| %s | %.1f%% |\n", k, 100 * s[k] / t }' | sort
}
profile() { # $1 = label, $2.. = import flags
  label=$1; shift
  rm -rf "$WORK/$label"
  perf record -q -F 250 --call-graph dwarf,16384 -o "$WORK/$label.data" -- \
    "$CAIRN" --datadir "$WORK/$label" import --quiet --blocks-dir "$CHAIN/blocks" "$@" >/dev/null 2>&1
  perf script -i "$WORK/$label.data" 2>/dev/null > "$WORK/$label.perf"
  "$INFERNO/bin/inferno-collapse-perf" --all "$WORK/$label.perf" > "$WORK/$label.folded"
  "$INFERNO/bin/inferno-flamegraph" --minwidth 1 --title "cairn import $* ($SUFFIX, commit $(git describe --always --dirty))" \
    < "$WORK/$label.folded" > "$OUT/import-$label-$SUFFIX.svg"
  # Per thread: perf script's first field is the thread name.
  echo "### $label: samples per thread"
  echo "| thread | share |"
  echo "|---|---|"
  awk '/^[^ \t]/ { c[$1]++ } END { for (n in c) print n, c[n] }' "$WORK/$label.perf" | thread_kind
  echo "($(grep -c '^[^ 	]' "$WORK/$label.perf") samples; $OUT/import-$label-$SUFFIX.svg)"
  echo
}
profile bare --no-index
profile indexed
