"""Latency of Esplora's `GET /address/:address/txs` (the mempool, then the 25 newest confirmed
transactions), for contrib/bench/esplora.sh and contrib/bench/ab.sh.

Usage: address_txs.py PORT REQUESTS table        a markdown table: p50 and p99 of a small
                                                  and of the largest history
       address_txs.py PORT REQUESTS p50 KIND     the p50 in seconds of KIND (small or large),
                                                  after 20 untimed requests
The large history is the address paid most often in the first transactions of 100 blocks spread
over the chain; the small one a payee of the tip's last transaction.
"""
import http.client
import json
import sys
import time

port, n, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
conn = http.client.HTTPConnection("127.0.0.1", port)


def get(path):
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        raise SystemExit(f"{path}: {r.status} {body[:200]!r}")
    return body


def address(kind):
    if kind == "small":
        tip = get("/blocks/tip/hash").decode()
        txs = json.loads(get(f"/block/{tip}/txs"))
        return next(o["scriptpubkey_address"] for t in reversed(txs) for o in t["vout"] if "scriptpubkey_address" in o)
    height = int(get("/blocks/tip/height"))
    paid = {}
    for h in range(1, height + 1, max(1, height // 100)):
        for t in json.loads(get(f"/block/{get(f'/block-height/{h}').decode()}/txs")):
            for o in t["vout"]:
                if "scriptpubkey_address" in o:
                    paid[o["scriptpubkey_address"]] = paid.get(o["scriptpubkey_address"], 0) + 1
    return max(paid, key=paid.get)


def times(a, warm):
    for _ in range(warm):
        get(f"/address/{a}/txs")
    out = []
    for _ in range(n):
        start = time.perf_counter()
        get(f"/address/{a}/txs")
        out.append(time.perf_counter() - start)
    return sorted(out)


if mode == "p50":
    t = times(address(sys.argv[4]), 20)
    print(f"{t[len(t) // 2]:.6f}")
else:
    print("| history | transactions | p50 | p99 |")
    print("|---|---|---|---|")
    for kind in ("small", "large"):
        a = address(kind)
        conn.request("GET", f"/address/{a}")
        r = conn.getresponse()
        body = r.read()
        count = json.loads(body)["chain_stats"]["tx_count"] if r.status == 200 else "more than 20,000"
        t = [x * 1000 for x in times(a, 0)]
        print(f"| {kind} | {count} | {t[len(t) // 2]:.2f} ms | {t[min(len(t) - 1, int(len(t) * 0.99))]:.2f} ms |")
