# Shared by the benchmark scripts: the build and the cached chain, elapsed time, medians, and
# the interleaved A/B comparison. Source it after defining RUNS, BLOCKS and TXS.

# bench_setup [CARGO BUILD ARGS...]: builds cairn (and what else is named) in release, sets
# CAIRN, CHAIN (the generated chain, cached in ${CAIRN_BENCH_CACHE:-/var/tmp/cairn-bench}),
# BITCOIND, CLI and WORK (a scratch folder).
bench_setup() {
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/cairn-target}"
  cargo build --release --locked --bin cairn "$@" >/dev/null 2>&1
  CAIRN="$CARGO_TARGET_DIR/release/cairn"
  CHAIN="${CAIRN_BENCH_CACHE:-/var/tmp/cairn-bench}/chain-$BLOCKS-$TXS-seed1"
  [ -f "$CHAIN/blocks.hex" ] || "$CAIRN" generate --blocks "$BLOCKS" --txs-per-block "$TXS" --seed 1 --out "$CHAIN"
  BITCOIND=${CAIRN_BITCOIND:-/opt/bitcoind/bitcoind}
  CLI="$(dirname "$BITCOIND")/bitcoin-cli"
  WORK=$(mktemp -d)
}

# elapsed START END: seconds between two `date +%s.%N` stamps.
elapsed() { awk -v s="$1" -v e="$2" 'BEGIN { printf "%.3f\n", e - s }'; }

# median: the median of the numbers on standard input.
median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

# compare LABEL_A FUNC_A LABEL_B FUNC_B: runs FUNC_A and FUNC_B (each prints its seconds)
# interleaved RUNS times, prints every sample, then a markdown row with both medians and B / A.
compare() {
  : > "$WORK/samples-a.txt"; : > "$WORK/samples-b.txt"
  i=1
  while [ "$i" -le "$RUNS" ]; do
    a=$($2); echo "run $i  $1: ${a}s"; echo "$a" >> "$WORK/samples-a.txt"
    b=$($4); echo "run $i  $3: ${b}s"; echo "$b" >> "$WORK/samples-b.txt"
    i=$((i + 1))
  done
  ma=$(median < "$WORK/samples-a.txt"); mb=$(median < "$WORK/samples-b.txt")
  echo
  echo "| chain | $1 (median) | $3 (median) | $3 / $1 |"
  echo "|---|---|---|---|"
  printf '| %s blocks x %s txs/block | %.3f s | %.3f s | %.3fx |\n' "$BLOCKS" "$TXS" "$ma" "$mb" \
    "$(awk -v a="$ma" -v b="$mb" 'BEGIN { print b / a }')"
  echo "machine: $(nproc) cores, $(free -g | awk '/Mem/ {print $2}') GiB; commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
}
