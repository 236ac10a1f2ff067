#!/bin/sh
# The Esplora API: BDK restoring a wallet with a full scan over cairn's Esplora API
# (bdk_esplora) against the same scan over cairn's Electrum server (bdk_electrum), both from one
# cairn on a generated chain that pays a wallet (`cairn generate --wallet-addresses`), the two
# taking turns (A B A B ...), RUNS times each, every run a fresh wallet; every run must find the
# transactions the generator wrote and all the same balance. Then the latency of
# `GET /address/:address/txs` (mempool, then the 25 newest confirmed transactions) for an address
# with a small history and for the one paid most often (the largest histories): REQUESTS
# requests each over one keep-alive connection, p50 and p99.
#
# Usage: contrib/bench/esplora.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS] [WALLET_ADDRESSES] [REQUESTS]
# Defaults: 2000 blocks, 53 txs per block, 3 runs, 1000 addresses, 200 requests.
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=${3:-3}
WALLET_ADDRESSES=${4:-1000}
REQUESTS=${5:-200}
. contrib/bench/lib.sh
bench_setup
wallet_sync_client
trap stack_cleanup EXIT INT TERM
cairn_stack --electrum-addr 127.0.0.1:29061 --http-addr 127.0.0.1:29063
until [ "$(curl -s http://127.0.0.1:29063/blocks/tip/height)" = "$BLOCKS" ]; do sleep 0.2; done
WALLET_TXS=$(sed -n 's/^# The wallet this chain pays ([0-9]* receive addresses, \([0-9]*\) transactions).*/\1/p' "$CHAIN/wallet.txt")
sync_with() { "$CLIENT" --descriptors "$CHAIN/wallet.txt" --server "$1" --found "$WORK/found.txt"; }
over_electrum() { sync_with tcp://127.0.0.1:29061; }
over_esplora() { sync_with http://127.0.0.1:29063; }
compare "BDK over Electrum (bdk_electrum)" over_electrum "BDK over Esplora (bdk_esplora)" over_esplora
found=$(sort -u "$WORK/found.txt")
if [ "$(echo "$found" | wc -l)" -ne 1 ] || [ "${found%% *}" != "$WALLET_TXS" ]; then
  echo "THE SCANS DISAGREE or miss transactions (txs balance receive-index, generator: $WALLET_TXS txs):"
  echo "$found"
  exit 1
fi
echo "every scan found the same $WALLET_TXS transactions and balance (txs balance receive-index: $found)"
echo
python3 - 127.0.0.1 29063 "$REQUESTS" <<'PY'
import http.client, json, sys, time

host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
conn = http.client.HTTPConnection(host, port)

def get(path):
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        raise SystemExit(f"{path}: {r.status} {body[:200]!r}")
    return body

# The address paid most often in the first 25 transactions of 100 blocks spread over the chain
# (the largest histories), and a payee of the tip's last transaction (a small one).
height = int(get("/blocks/tip/height"))
paid = {}
for h in range(1, height + 1, max(1, height // 100)):
    for t in json.loads(get(f"/block/{get(f'/block-height/{h}').decode()}/txs")):
        for o in t["vout"]:
            if "scriptpubkey_address" in o:
                paid[o["scriptpubkey_address"]] = paid.get(o["scriptpubkey_address"], 0) + 1
large = max(paid, key=paid.get)
tip = get("/blocks/tip/hash").decode()
small = next(o["scriptpubkey_address"] for t in reversed(json.loads(get(f"/block/{tip}/txs"))) for o in t["vout"] if "scriptpubkey_address" in o)
print("| history | transactions | p50 | p99 |")
print("|---|---|---|---|")
for name, address in (("small", small), ("large", large)):
    conn.request("GET", f"/address/{address}")
    r = conn.getresponse()
    body = r.read()
    count = json.loads(body)["chain_stats"]["tx_count"] if r.status == 200 else "more than 20,000"
    times = []
    for _ in range(n):
        start = time.perf_counter()
        get(f"/address/{address}/txs")
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    print(f"| {name} | {count} | {times[len(times) // 2]:.2f} ms | {times[min(len(times) - 1, int(len(times) * 0.99))]:.2f} ms |")
PY
