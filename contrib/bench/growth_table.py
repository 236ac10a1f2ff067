#!/usr/bin/env python3
"""The growth table: the JSON files of contrib/bench/growth.sh, one per chain, side by side,
smallest chain first, and how each figure grows per tenfold of transactions between the two
largest chains: (b / a) ** (1 / log10(txs_b / txs_a)); 1.00x is flat, 10x is linear.

Usage: contrib/bench/growth_table.py GROWTH_JSON...
"""
import json
import math
import sys


def figures(doc):
    """(name, value) of every row, in table order."""
    imported = doc["import"] or {}
    rows = [
        ("import, seconds", imported.get("wall_s")),
        ("import CPU per transaction, us", imported.get("cpu_us_per_tx")),
        ("import peak RSS, MiB", imported.get("peak_rss_kib", 0) / 1024 or None),
        ("index bytes per transaction", doc["disk"]["index_bytes_per_tx"]),
        ("kernel (blocks + chainstate), MB", doc["disk"]["kernel_bytes"] / 1e6),
        ("server peak RSS after the load, MiB", doc["serve_peak_rss_kib"] / 1024),
    ]
    for clients, q in sorted(doc["queries"].items(), key=lambda kv: int(kv[0])):
        rows.append((f"{clients} clients: p50, ms", q["p50_ms"]))
        rows.append((f"{clients} clients: p99, ms", q["p99_ms"]))
        rows.append((f"{clients} clients: requests a second", q["throughput_rps"]))
        for kind, k in q["per_kind"].items():
            rows.append((f"{clients} clients: {kind} p50, ms", k["p50_ms"]))
    return rows


def main(paths):
    docs = sorted((json.load(open(p)) for p in paths), key=lambda d: d["txs"])
    if len(docs) < 2:
        sys.exit("usage: growth_table.py GROWTH_JSON GROWTH_JSON...")
    a, b = docs[-2], docs[-1]
    tenfolds = math.log10(b["txs"] / a["txs"])
    names = [f"{d['txs']:,} txs{' (' + d['memory_limit'] + ')' if d.get('memory_limit') else ''}" for d in docs]
    print("| figure | " + " | ".join(names) + " | per tenfold (last two) |")
    print("|---|" + "---|" * len(docs) + "---|")
    columns = [dict(figures(d)) for d in docs]
    for name, _ in figures(b):
        values = [c.get(name) for c in columns]
        x, y = values[-2], values[-1]
        growth = f"{(y / x) ** (1 / tenfolds):.2f}x" if x and y else "-"
        print(f"| {name} | " + " | ".join("-" if v is None else f"{v:,.3f}" for v in values) + f" | {growth} |")
    errors = [sum(q["errors"] for q in d["queries"].values()) for d in docs]
    print(f"\nerrors under load: {errors}; mismatches: {[d['mismatches'] for d in docs]}; "
          f"commands: {sorted({d['command'] for d in docs})}")


if __name__ == "__main__":
    main(sys.argv[1:])
