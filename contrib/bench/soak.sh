#!/bin/sh
# Electrum soak (issue 12, part 3; not in CI): CLIENTS Electrum clients, each subscribed to the
# tip and to SUBS script hashes, held for SECONDS while a bitcoind mines a block every 3 s and
# its wallet pays 5 of the subscribed scripts a second. Prints cairn's RSS over time, the
# notification latency of payments and blocks (p50, p99), notifications owed but missing, and
# errors (contrib/bench/load/soak.rs), and keeps the JSON report. With ATTACK=N (issue 25), N attacking
# connections of each kind (contrib/bench/attackers.py: silent sockets, unread and slowly read
# answers, costly requests, subscription hogs, HTTP requests hung up on) run beside the soak from
# other loopback addresses than its clients (127.0.0.1). Either way it prints what cairn's
# throttling and limits did (/metrics).
#
# Usage: [ATTACK=N] contrib/bench/soak.sh [CLIENTS] [SUBS] [SECONDS]     (defaults: 1000 100 600)
set -eu
cd "$(dirname "$0")/../.."
CLIENTS=${1:-1000}
SUBS=${2:-100}
SECONDS_=${3:-600}
sh contrib/setup.sh
[ -n "${CAIRN_BITCOIND:-}" ] || [ -x /opt/bitcoind/bitcoind ] || sh contrib/install-bitcoind.sh /opt/bitcoind >/dev/null
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/cairn-target}"
# As every bench script: CAIRN_BENCH_PROFILE names the build profile (release by default) of cairn
# and of the load generator, CAIRN_BIN a cairn built elsewhere.
profile=${CAIRN_BENCH_PROFILE:-release}
cargo build --profile "$profile" --locked --bin cairn --example soak >/dev/null 2>&1
CAIRN=${CAIRN_BIN:-$CARGO_TARGET_DIR/$profile/cairn}
BITCOIND=${CAIRN_BITCOIND:-/opt/bitcoind/bitcoind}
CLI_BIN="$(dirname "$BITCOIND")/bitcoin-cli"
WORK=$(mktemp -d)
CLI="$CLI_BIN -regtest -datadir=$WORK/node -rpcport=29201 -rpcuser=u -rpcpassword=p"
cleanup() {
  kill "${PID:-}" 2>/dev/null || true
  $CLI stop >/dev/null 2>&1 || true
  sleep 2; rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
mkdir -p "$WORK/node"
"$BITCOIND" -regtest -datadir="$WORK/node" -port=29200 -bind=127.0.0.1 -rpcport=29201 -rpcuser=u -rpcpassword=p \
  -fallbackfee=0.0001 -daemon -printtoconsole=0 >/dev/null
until $CLI getblockcount >/dev/null 2>&1; do sleep 0.2; done
$CLI createwallet soak >/dev/null
MINE=$($CLI getnewaddress)
$CLI generatetoaddress 300 "$MINE" >/dev/null
ATTACK=${ATTACK:-0}
printf 'electrum_max_connections = %s\n' "$((CLIENTS + 100 + 5 * ATTACK))" > "$WORK/cairn.toml"
"$CAIRN" --config "$WORK/cairn.toml" --datadir "$WORK/cairn" --admin-addr 127.0.0.1:0 --electrum-addr 127.0.0.1:29210 \
  --http-addr 127.0.0.1:29211 --metrics-addr 127.0.0.1:29212 \
  --connect 127.0.0.1:29200 --no-listen run >"$WORK/cairn.log" 2>&1 &
PID=$!
TIP=$($CLI getbestblockhash)
until "$CAIRN" --datadir "$WORK/cairn" status --json 2>/dev/null | grep -q "\"index_tip\":{\"height\":300,\"hash\":\"$TIP\""; do sleep 0.5; done
OUT_DIR=${CAIRN_BENCH_OUT:-/var/tmp/cairn-bench/results}
mkdir -p "$OUT_DIR"
OUT="$OUT_DIR/soak-$CLIENTS-$SUBS-$(date -u +%Y%m%dT%H%M%SZ).json"
if [ "$ATTACK" -gt 0 ]; then
  # The mining address: 300 coinbases, so its get_balance reads 300 rows and /address 300 txs.
  SH=$($CLI getaddressinfo "$MINE" | python3 -c 'import hashlib, json, sys
print(hashlib.sha256(bytes.fromhex(json.load(sys.stdin)["scriptPubKey"])).digest()[::-1].hex())')
  python3 contrib/bench/attackers.py --electrum 127.0.0.1:29210 --http 127.0.0.1:29211 \
    --scripthash "$SH" --address "$MINE" --per "$ATTACK" --seconds "$SECONDS_" > "$WORK/attackers.json" &
  ATTACKERS=$!
fi
"$CARGO_TARGET_DIR/$profile/examples/soak" --electrum 127.0.0.1:29210 --pid "$PID" --cli "$CLI" \
  --clients "$CLIENTS" --subs "$SUBS" --seconds "$SECONDS_" --json "$OUT"
if [ "$ATTACK" -gt 0 ]; then
  wait "$ATTACKERS" || true
  echo "attackers saw: $(cat "$WORK/attackers.json")"
fi
curl -s http://127.0.0.1:29212/metrics | grep -E '^cairn_(electrum_throttled_total|electrum_disconnects_total|electrum_connections_refused_total|http_work_refused_total|http_connections_refused_total)' | sed 's/^/metric: /'
echo "command: ATTACK=$ATTACK sh contrib/bench/soak.sh $CLIENTS $SUBS $SECONDS_; report in $OUT"
grep -ciE "error|panick" "$WORK/cairn.log" | sed 's/^/error lines in cairn.log: /'
