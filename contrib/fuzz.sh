#!/bin/sh
# Runs every cargo-fuzz target for SECONDS each (default 60), from the seeds in fuzz/seeds/ and
# whatever corpus earlier runs left in fuzz/corpus/. A crash stops the script with the failing
# input saved under fuzz/artifacts/<target>/ (add it to the target's regression test).
#
# Usage: sh contrib/fuzz.sh [SECONDS] [TARGET...]
# Installs the nightly toolchain and cargo-fuzz when missing.
# The first build compiles RocksDB and the kernel again (about 30 minutes here); point
# ROCKSDB_LIB_DIR at a built librocksdb.a with LZ4 and zstd (with ROCKSDB_STATIC=1) to skip
# RocksDB's part: the out/ folder of a librocksdb-sys build of this lock file has one.
set -eu
cd "$(dirname "$0")/../fuzz"
SECONDS_=${1:-60}
[ $# -gt 0 ] && shift
TARGETS=${*:-electrum_request p2p_message blk_scan tx_checks addr_book headers_sync script_rules script_interpreter proxy_header}
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
export CARGO_TARGET_DIR="${CAIRN_FUZZ_TARGET_DIR:-/var/tmp/cairn-fuzz-target}"
cargo +nightly fuzz build
for target in $TARGETS; do
  mkdir -p "corpus/$target"
  seeds=""
  [ -d "seeds/$target" ] && seeds="seeds/$target"
  echo "== $target, $SECONDS_ s"
  log="${TMPDIR:-/tmp}/fuzz-$target.log"
  # -rss_limit_mb: the Electrum target holds a kernel and an index besides libFuzzer's own.
  # No leak check: what lives as long as the process (the fixtures in OnceLocks, the kernel's
  # log callback, installed once) is reported as leaked at exit, once, whatever the inputs were.
  if ! ASAN_OPTIONS=detect_leaks=0 cargo +nightly fuzz run "$target" "corpus/$target" $seeds -- \
      -max_total_time="$SECONDS_" -rss_limit_mb=4096 -detect_leaks=0 >"$log" 2>&1; then
    tail -40 "$log"
    echo "$target: crash; the input is under fuzz/artifacts/$target/" >&2
    exit 1
  fi
  grep -E "^#[0-9]+ *DONE|^Done [0-9]+ runs" "$log" | tail -2
done
