#!/bin/sh
# What a block costs cairn with silent-payment subscriptions (Frigate's dialect) beside a full
# mempool: for each subscription count, cairn's CPU time from a block's arrival until it is idle
# again, the scans it counted, and what each subscription's first scan of the mempool cost.
# The row with no subscriptions is the baseline: the block's validation and indexing alone.
#
# A regtest Bitcoin Core 31.99 mines; cairn follows it over P2P (--connect), its mempool filled
# over Electrum with MEMPOOL eligible taproot transactions that pay no subscription; each block
# confirms BLOCK of them, and the mempool is topped up to MEMPOOL before the next. Subscriptions
# come from ten hosts of five /24s (cairn's per-host and per-group caps), 100 a connection.
# cairn's cost throttling is off (as the other benches: the CPU is measured, not the limits).
#
# Usage: sh contrib/bench/sp-block-cpu.sh [MEMPOOL] [BLOCK] [COUNTS...]
# Defaults: 30000 mempool transactions, blocks of 1000, 0 30 300 2000 subscriptions (about an
# hour on 2 cores, nearly all of it the 2,000 first scans of the whole mempool).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
MEMPOOL=${1:-30000}
BLOCK=${2:-1000}
[ $# -gt 2 ] && shift 2 || set -- 0 30 300 2000
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/cairn-target}"
export CAIRN_NETWORK=regtest
# What a fresh machine lacks: build dependencies and nc.
sh contrib/setup.sh
profile=${CAIRN_BENCH_PROFILE:-release}
if [ -n "${CAIRN_BIN:-}" ]; then
  CAIRN=$CAIRN_BIN
else
  cargo build --profile "$profile" --locked --bin cairn >/dev/null 2>&1
  CAIRN="$CARGO_TARGET_DIR/$profile/cairn"
fi
BITCOIND=${CAIRN_CORE_BITCOIND:-/var/tmp/cairn-core/bin/bitcoind}
[ -x "$BITCOIND" ] || sh contrib/build-core-bitcoind.sh "$(dirname "$(dirname "$BITCOIND")")"
CLI="$(dirname "$BITCOIND")/bitcoin-cli"
WORK=$(mktemp -d)
node_rpc() { "$CLI" -regtest -datadir="$WORK/node" -rpcport=29141 -rpcuser=u -rpcpassword=p "$@"; }
cleanup() {
  [ -n "${CAIRN_PID:-}" ] && kill "$CAIRN_PID" 2>/dev/null
  node_rpc stop >/dev/null 2>&1 || true
  sleep 2; rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

mkdir -p "$WORK/node"
"$BITCOIND" -regtest -datadir="$WORK/node" -port=29142 -bind=127.0.0.1 -rpcport=29141 \
  -rpcuser=u -rpcpassword=p -daemon -printtoconsole=0 >/dev/null
until node_rpc getblockcount >/dev/null 2>&1; do sleep 0.5; done

CAIRN_ELECTRUM_COST_SOFT_LIMIT=0 CAIRN_ELECTRUM_COST_HARD_LIMIT=0 \
  "$CAIRN" --datadir "$WORK/cairn" --admin-addr 127.0.0.1:0 --no-listen \
  --connect 127.0.0.1:29142 --silent-payments --electrum-addr 127.0.0.1:29161 \
  --metrics-addr 127.0.0.1:29162 --electrum-idle-timeout-secs 86400 run >"$WORK/cairn.log" 2>&1 &
CAIRN_PID=$!
until nc -z 127.0.0.1 29161 2>/dev/null; do
  kill -0 "$CAIRN_PID" 2>/dev/null || { tail -20 "$WORK/cairn.log"; exit 1; }
  sleep 0.2
done

out=$(mktemp)
if ! python3 "$HERE/sp_block_cpu.py" "$CAIRN_PID" 29141 29161 29162 "$MEMPOOL" "$BLOCK" "$@" > "$out"; then
  cat "$out"; tail -20 "$WORK/cairn.log"; exit 1
fi
cat "$out"
commit=$(git describe --always --dirty 2>/dev/null || echo unknown)
echo
echo "| subscriptions | mempool | block CPU | per subscription | scans after the block (block / mempool) | first scan of the mempool, each |"
echo "|---|---|---|---|---|---|"
python3 - "$out" <<'PY'
import json, sys
rows = json.loads(open(sys.argv[1]).read().splitlines()[-1])["rounds"]
base = rows[0]["block_cpu_s"] if rows and rows[0]["subscriptions"] == 0 else 0.0
added_before = 0
for r in rows:
    n = r["subscriptions"]
    per = f'{(r["block_cpu_s"] - base) / n * 1000:.1f} ms' if n else "(baseline)"
    added = n - added_before
    first = f'{r["first_scans_cpu_s"] / added:.2f} s' if added else "-"
    added_before = n
    print(f'| {n:,} | {r["mempool"]:,} | {r["block_cpu_s"]:.2f} s | {per} | '
          f'{r["block_scans"]:,} / {r["mempool_scans_after_block"]:,} | {first} |')
PY
echo "blocks of $BLOCK eligible transactions; cairn $profile build, commit $commit; $(nproc) cores"
rm -f "$out"
