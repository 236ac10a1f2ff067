#!/usr/bin/env python3
"""What a block costs cairn with silent-payment subscriptions (Frigate's dialect) beside a full
mempool: driven by contrib/bench/sp-block-cpu.sh, which starts a regtest bitcoind and a cairn
that follows it over P2P.

Coins: coinbases pay a taproot output whose only leaf is OP_TRUE (internal key G, not BIP352's
NUMS point, so a script-path spend is an eligible input), fanned out into outputs of the same
script; each mempool transaction spends one of them by its script path (no signature to make)
to a random taproot key: every one is eligible and pays no subscription. They are broadcast to
cairn over Electrum (cairn relays them to bitcoind); a block is bitcoind's `generateblock` of
the oldest BLOCK of them.

Rounds, one per subscription count: subscriptions are added (from the tip, on connections of
five /24s, two hosts each, 100 a connection, as cairn's limits allow) until the count is
reached, each first scan (the whole mempool) awaited; the mempool is topped up to MEMPOOL; when
cairn is idle, a block is mined and cairn's CPU time (utime + stime of its process) is read
from before the block until cairn is idle again, with the scans it counted
(`cairn_silent_payments_scanned_total`).

Usage: sp_block_cpu.py CAIRN_PID BITCOIND_RPC_PORT ELECTRUM_PORT METRICS_PORT MEMPOOL BLOCK
COUNTS... (prints one JSON line a round, then a summary line).
"""

import base64
import hashlib
import json
import os
import secrets
import selectors
import socket
import struct
import sys
import threading
import time
import urllib.request

# secp256k1, just enough for one taproot output key.
P = 2**256 - 2**32 - 977
N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
G = (0x79BE667EF9DCBBAC55A06295CE870B07029BFCDB2DCE28D959F2815B16F81798,
     0x483ADA7726A3C4655DA4FBFC0E1108A8FD17B448A68554199C47D08FFB10D4B8)


def point_add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    if a[0] == b[0] and (a[1] + b[1]) % P == 0:
        return None
    if a == b:
        lam = 3 * a[0] * a[0] * pow(2 * a[1], P - 2, P) % P
    else:
        lam = (b[1] - a[1]) * pow(b[0] - a[0], P - 2, P) % P
    x = (lam * lam - a[0] - b[0]) % P
    return (x, (lam * (a[0] - x) - a[1]) % P)


def point_mul(k, point):
    result = None
    while k:
        if k & 1:
            result = point_add(result, point)
        point = point_add(point, point)
        k >>= 1
    return result


def tagged(tag, data):
    t = hashlib.sha256(tag.encode()).digest()
    return hashlib.sha256(t + t + data).digest()


def sha256d(data):
    return hashlib.sha256(hashlib.sha256(data).digest()).digest()


LEAF = b"\x51"  # OP_TRUE
LEAF_HASH = tagged("TapLeaf", b"\xc0" + bytes([len(LEAF)]) + LEAF)
INTERNAL = G[0].to_bytes(32, "big")  # G has an even y
OUTPUT_KEY = point_add(G, point_mul(int.from_bytes(tagged("TapTweak", INTERNAL + LEAF_HASH), "big"), G))
SCRIPT = b"\x51\x20" + OUTPUT_KEY[0].to_bytes(32, "big")
CONTROL = bytes([0xC0 | (OUTPUT_KEY[1] & 1)]) + INTERNAL
WITNESS = [LEAF, CONTROL]


def compact(n):
    if n < 0xFD:
        return bytes([n])
    if n <= 0xFFFF:
        return b"\xfd" + struct.pack("<H", n)
    return b"\xfe" + struct.pack("<I", n)


def spend(outpoint, outputs):
    """A version-2 transaction spending `outpoint` (txid bytes as displayed, vout) by the
    OP_TRUE leaf to `outputs` [(script, sats)]: (hex, txid as displayed)."""
    txid, vout = outpoint
    ins = compact(1) + bytes.fromhex(txid)[::-1] + struct.pack("<I", vout) + b"\x00" + struct.pack("<I", 0xFFFFFFFD)
    outs = compact(len(outputs)) + b"".join(struct.pack("<q", v) + compact(len(s)) + s for s, v in outputs)
    version, locktime = struct.pack("<i", 2), struct.pack("<I", 0)
    witness = compact(len(WITNESS)) + b"".join(compact(len(w)) + w for w in WITNESS)
    legacy = version + ins + outs + locktime
    full = version + b"\x00\x01" + ins + outs + witness + locktime
    return full.hex(), sha256d(legacy)[::-1].hex()


class Rpc:
    """bitcoind's JSON-RPC (user u, password p)."""

    def __init__(self, port):
        self.url = f"http://127.0.0.1:{port}/"
        self.auth = "Basic " + base64.b64encode(b"u:p").decode()

    def __call__(self, method, *params):
        body = json.dumps({"jsonrpc": "1.0", "id": 0, "method": method, "params": list(params)}).encode()
        req = urllib.request.Request(self.url, body, {"Authorization": self.auth})
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                answer = json.load(r)
        except urllib.error.HTTPError as e:
            answer = json.load(e)
        if answer.get("error"):
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]


class Electrum:
    """A line-delimited Electrum connection from `source`, whose notifications a reader thread
    drains (so cairn never waits on it) and counts."""

    def __init__(self, port, source):
        self.sock = socket.socket()
        self.sock.bind((source, 0))
        self.sock.connect(("127.0.0.1", port))
        self.buf = b""
        self.answers = {}
        self.next_id = 0
        self.done = 0  # notifications at progress 1.0
        self.cond = threading.Condition()
        self.write_lock = threading.Lock()

    def send(self, requests):
        """Sends requests [(method, params)] as one batch (a single one alone): their ids."""
        with self.write_lock:
            ids = list(range(self.next_id, self.next_id + len(requests)))
            self.next_id += len(requests)
            msgs = [{"jsonrpc": "2.0", "id": i, "method": m, "params": p} for i, (m, p) in zip(ids, requests)]
            line = json.dumps(msgs if len(msgs) > 1 else msgs[0]) + "\n"
            self.sock.sendall(line.encode())
        return ids

    def wait(self, ids, timeout=600):
        deadline = time.time() + timeout
        with self.cond:
            while not all(i in self.answers for i in ids):
                if not self.cond.wait(max(0.0, deadline - time.time())):
                    raise RuntimeError("no answer from cairn")
            return [self.answers.pop(i) for i in ids]

    def call(self, method, params):
        return self.wait(self.send([(method, params)]))[0]

    def on_data(self, data):
        if not data:
            raise RuntimeError("cairn closed a connection")
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        with self.cond:
            for line in lines:
                msg = json.loads(line)
                for m in msg if isinstance(msg, list) else [msg]:
                    if "id" in m and m["id"] is not None:
                        self.answers[m["id"]] = m
                    elif m.get("method") == "blockchain.silentpayments.subscribe" and m["params"][1] == 1.0:
                        self.done += 1
            self.cond.notify_all()


def reader(conns):
    sel = selectors.DefaultSelector()
    for c in conns:
        sel.register(c.sock, selectors.EVENT_READ, c)
    while True:
        for key, _ in sel.select():
            key.data.on_data(key.fileobj.recv(1 << 20))


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_idle(pid, quiet=0.02, period=1.0):
    """Waits until cairn used less than `quiet` CPU seconds in each of two `period`s."""
    calm, last = 0, cpu_seconds(pid)
    while calm < 2:
        time.sleep(period)
        now = cpu_seconds(pid)
        calm = calm + 1 if now - last < quiet else 0
        last = now


def main():
    pid, rpc_port, electrum_port, metrics_port, mempool, block = map(int, sys.argv[1:7])
    counts = [int(c) for c in sys.argv[7:]]
    rpc = Rpc(rpc_port)
    scanned = lambda source: metrics(metrics_port).get(f'cairn_silent_payments_scanned_total{{source="{source}"}}', 0.0)
    pooled = lambda: metrics(metrics_port).get("cairn_mempool_transactions", 0.0)

    # Coins: enough fanned-out outputs for the mempool and a top-up a round.
    need = mempool + block * len(counts)
    fanouts = (need + 999) // 1000
    descriptor = rpc("getdescriptorinfo", f"raw({SCRIPT.hex()})")["descriptor"]
    hashes = rpc("generatetodescriptor", fanouts, descriptor)
    rpc("generatetodescriptor", 101, descriptor)  # the coinbases mature
    coins = []
    for h in hashes:
        coinbase = rpc("getblock", h, 2)["tx"][0]
        value = round(coinbase["vout"][0]["value"] * 1e8)
        each = (value - 100_000) // 1000
        raw, txid = spend((coinbase["txid"], 0), [(SCRIPT, each)] * 1000)
        rpc("sendrawtransaction", raw)
        coins += [((txid, i), each) for i in range(1000)]
    while rpc("getmempoolinfo")["size"]:
        rpc("generatetodescriptor", 1, descriptor)
    tip = rpc("getblockcount")

    broadcaster = Electrum(electrum_port, "127.0.0.1")
    threading.Thread(target=reader, args=([broadcaster],), daemon=True).start()
    broadcaster.call("server.version", ["cairn-bench", "1.4"])
    while True:
        answer = broadcaster.call("blockchain.headers.subscribe", [])
        if answer.get("result", {}).get("height", -1) >= tip:
            break
        time.sleep(0.5)
    pending = []  # (txid, hex) in cairn's mempool, oldest first

    def top_up(to):
        added = 0
        while len(pending) < to:
            batch = []
            while coins and len(batch) < 500 and len(pending) + len(batch) < to:
                outpoint, value = coins.pop()
                batch.append(spend(outpoint, [(b"\x51\x20" + secrets.token_bytes(32), value - 1000)]))
            answers = broadcaster.wait(broadcaster.send([("blockchain.transaction.broadcast", [h]) for h, _ in batch]))
            for (h, txid), a in zip(batch, answers):
                if a.get("result") != txid:
                    raise RuntimeError(f"broadcast refused: {a}")
                pending.append((txid, h))
            added += len(batch)
        while pooled() < to:
            time.sleep(0.2)
        return added

    subs = []  # connections holding subscriptions
    sources = [f"127.0.{10 + g}.{1 + h}" for g in range(5) for h in range(2)]
    held = 0
    spend_key = "02" + format(G[0], "064x")
    results = []
    for count in counts:
        top_up(mempool)
        setup_cpu, setup_start = cpu_seconds(pid), time.time()
        while held < count:
            source = sources[held // 200]
            conn = Electrum(electrum_port, source)
            threading.Thread(target=reader, args=([conn],), daemon=True).start()
            conn.call("server.version", ["cairn-bench", "1.4"])
            subs.append(conn)
            n = min(100, count - held, 200 - held % 200)
            height = rpc("getblockcount")
            requests = [("blockchain.silentpayments.subscribe",
                         [secrets.token_bytes(32).hex(), spend_key, height]) for _ in range(n)]
            for a in conn.wait(conn.send(requests), timeout=3600):
                if "result" not in a:
                    raise RuntimeError(f"subscribe refused: {a}")
            held += n
        # Every first scan told its end.
        deadline = time.time() + 4 * 3600
        while sum(c.done for c in subs) < held:
            if time.time() > deadline:
                raise RuntimeError("first scans never ended")
            time.sleep(1)
        wait_idle(pid)
        setup = {"first_scans_cpu_s": round(cpu_seconds(pid) - setup_cpu, 2),
                 "first_scans_wall_s": round(time.time() - setup_start, 1)}

        in_pool = pooled()
        before = {"cpu": cpu_seconds(pid), "block": scanned("block"), "mempool": scanned("mempool")}
        start = time.time()
        confirmed = pending[:block]
        del pending[:block]
        rpc("generateblock", descriptor, [h for _, h in confirmed])
        height = rpc("getblockcount")
        target = before["block"] + count * block
        while metrics(metrics_port).get("cairn_index_tip_height", 0) < height or scanned("block") < target:
            time.sleep(0.1)
        notified = time.time() - start
        wait_idle(pid)
        after = {"cpu": cpu_seconds(pid), "block": scanned("block"), "mempool": scanned("mempool")}
        row = {"subscriptions": count, "mempool": int(in_pool), "block_txs": block,
               "block_cpu_s": round(after["cpu"] - before["cpu"], 2),
               "scans_done_s": round(notified, 2),
               "block_scans": int(after["block"] - before["block"]),
               "mempool_scans_after_block": int(after["mempool"] - before["mempool"]), **setup}
        results.append(row)
        print(json.dumps(row), flush=True)
    print(json.dumps({"rounds": results}), flush=True)


if __name__ == "__main__":
    main()
