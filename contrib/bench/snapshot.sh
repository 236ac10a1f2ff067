#!/bin/sh
# A new node from a running node's snapshot against a new node from the chain itself. The
# baseline is `cairn import` of the chain's blocks (validation and indexing, the fastest sync
# there is: no network); against it, `cairn snapshot` of a node serving that chain (how long
# block submissions waited, and the whole snapshot) plus the start of a node from the snapshot
# (its manifest checked, every file hashed, until it answers at the tip). RUNS snapshots and
# starts, medians.
#
# Usage: contrib/bench/snapshot.sh [BLOCKS] [TXS_PER_BLOCK] [RUNS]
# Defaults: 2000 blocks, 53 txs per block (about 100k transactions), 3 runs.
set -eu
cd "$(dirname "$0")/../.."
BLOCKS=${1:-2000}
TXS=${2:-53}
RUNS=${3:-3}
. contrib/bench/lib.sh
bench_setup
export CAIRN_LOG="${CAIRN_LOG:-warn}"
trap 'for d in "$WORK"/*/regtest; do [ -f "$d/admin.addr" ] && "$CAIRN" --datadir "$(dirname "$d")" stop >/dev/null 2>&1; done; rm -rf "$WORK"' EXIT INT TERM

# served DATADIR: starts `cairn run` there (no peers, ports of its own) and returns once its
# kernel and index answer at the chain's tip.
served() {
  "$CAIRN" --datadir "$1" --no-listen --admin-addr 127.0.0.1:0 --electrum-addr 127.0.0.1:0 run \
    >"$1.log" 2>&1 &
  waited=0
  until "$CAIRN" --datadir "$1" status --json 2>/dev/null | grep -q "\"index_tip\":{\"height\":$BLOCKS,"; do
    sleep 0.05; waited=$((waited + 1))
    [ "$waited" -lt 12000 ] || { echo "cairn on $1 never answered at height $BLOCKS:"; tail -5 "$1.log"; exit 1; }
  done
}

start=$(date +%s.%N)
"$CAIRN" --datadir "$WORK/src" import --quiet --blocks-dir "$CHAIN/blocks" >/dev/null
import_s=$(elapsed "$start" "$(date +%s.%N)")
served "$WORK/src"

: > "$WORK/runs"
i=0
while [ "$i" -lt "$RUNS" ]; do
  "$CAIRN" --datadir "$WORK/src" snapshot "$WORK/snap$i" > "$WORK/report$i.json"
  start=$(date +%s.%N)
  served "$WORK/snap$i"
  started_s=$(elapsed "$start" "$(date +%s.%N)")
  "$CAIRN" --datadir "$WORK/snap$i" stop >/dev/null
  python3 - "$WORK/report$i.json" "$started_s" >> "$WORK/runs" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(r["pause_ms"], r["seconds"], sys.argv[2], r["bytes"], r["staged"]["linked"], r["staged"]["copied"])
PY
  i=$((i + 1))
done
python3 - "$WORK/runs" "$import_s" "$BLOCKS" "$TXS" "$BENCH_COMMAND" <<'PY'
import json, statistics, sys
runs = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
med = lambda i: statistics.median(r[i] for r in runs)
import_s = float(sys.argv[2])
pause_ms, snap_s, start_s = med(0), med(1), med(2)
print(f"chain {sys.argv[3]} blocks x {sys.argv[4]} txs; {len(runs)} snapshots; medians")
print(f"  new node by import (baseline):       {import_s:8.2f} s")
print(f"  snapshot of the serving node:        {snap_s:8.2f} s (block submissions waited {pause_ms:.0f} ms; {runs[0][3]/1e6:.1f} MB, {runs[0][4]:.0f} files linked, {runs[0][5]:.0f} copied)")
print(f"  start from the snapshot, at the tip: {start_s:8.2f} s (manifest checked)")
print(f"  snapshot + start / import:           {(snap_s + start_s) / import_s:8.3f}x")
print(json.dumps({"command": sys.argv[5], "import_s": import_s, "snapshot_s": snap_s,
                  "pause_ms": pause_ms, "start_s": start_s,
                  "ratio": (snap_s + start_s) / import_s}))
PY
