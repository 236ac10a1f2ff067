#!/usr/bin/env python3
"""Attackers beside the soak (issue 25): PER connections of each kind, each kind from two
loopback addresses of its own /24 (127.0.K.1 and 127.0.K.2), so that per-host and per-subnet
limits apply as they would to hosts on the Internet. Runs until SECONDS have passed, then prints
what each kind got, as JSON.

Kinds:
  silent      connect and say nothing
  hog         ask for 9 MB of pongs (protocol 1.7's pong_len) with a 4 KiB receive buffer, never read
  slow        the same, reading 4 KiB a second
  cost        get_balance of a busy script, each answer read before the next request
  subscribe   subscribe to script hashes in batches of 500 until refused, then hold them
  http        (with --http) GET /address/<busy> and hang up at once, over and over

Usage: attackers.py --electrum HOST:PORT --scripthash SH --address ADDR [--http HOST:PORT]
                    [--per 20] [--seconds 600]
"""
import argparse
import json
import os
import socket
import threading
import time

KINDS = ["silent", "hog", "slow", "cost", "subscribe", "http"]


def connect(src, dst, rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.bind((src, 0))
    s.settimeout(10)
    s.connect(dst)
    return s


def line(obj):
    return (json.dumps(obj) + "\n").encode()


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}

    def add(self, kind, what, n=1):
        with self.lock:
            self.counts.setdefault(kind, {}).setdefault(what, 0)
            self.counts[kind][what] += n


def attacker(kind, src, args, stop, tally):
    dst = args.electrum
    while not stop.is_set():
        try:
            if kind == "http":
                s = connect(src, args.http)
                s.sendall(f"GET /address/{args.address} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                s.close()
                tally.add(kind, "requests")
                continue
            rcvbuf = 4096 if kind in ("hog", "slow") else None
            s = connect(src, dst, rcvbuf)
            tally.add(kind, "connected")
            if kind == "silent":
                while not stop.is_set() and s.recv(1) != b"":
                    pass
            elif kind in ("hog", "slow"):
                s.sendall(line({"jsonrpc": "2.0", "id": 0, "method": "server.version",
                                "params": ["attacker", ["1.4", "1.7"]]}))
                pings = [{"jsonrpc": "2.0", "id": i, "method": "server.ping", "params": [1000000]}
                         for i in range(1, 10)]
                s.sendall((json.dumps(pings) + "\n").encode())
                while not stop.is_set():
                    if kind == "slow":
                        got = s.recv(4096)
                        if not got:
                            break
                        tally.add(kind, "bytes", len(got))
                    time.sleep(1)
                    if kind == "hog":
                        # Never reads; still there?
                        s.setblocking(False)
                        try:
                            if s.recv(1, socket.MSG_PEEK) == b"":
                                break
                        except BlockingIOError:
                            pass
                        s.setblocking(True)
            elif kind == "cost":
                f = s.makefile("rb")
                req = line({"jsonrpc": "2.0", "id": 1, "method": "blockchain.scripthash.get_balance",
                            "params": [args.scripthash]})
                while not stop.is_set():
                    s.sendall(req)
                    answer = f.readline()
                    if not answer:
                        break
                    tally.add(kind, "excessive" if b"excessive" in answer else "answers")
            elif kind == "subscribe":
                f = s.makefile("rb")
                n = 0
                while not stop.is_set():
                    batch = [{"jsonrpc": "2.0", "id": i, "method": "blockchain.scripthash.subscribe",
                              "params": [os.urandom(32).hex()]} for i in range(500)]
                    s.sendall((json.dumps(batch) + "\n").encode())
                    answer = f.readline()
                    if not answer:
                        break
                    n += answer.count(b'"result"')
                    if b'"error"' in answer:
                        break
                tally.add(kind, "subscriptions", n)
                while not stop.is_set() and s.recv(65536) != b"":
                    pass
            s.close()
            tally.add(kind, "ended")
        except OSError:
            tally.add(kind, "refused_or_failed")
            time.sleep(0.2)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--electrum", required=True)
    p.add_argument("--http")
    p.add_argument("--scripthash", required=True)
    p.add_argument("--address", required=True)
    p.add_argument("--per", type=int, default=20)
    p.add_argument("--seconds", type=float, default=600)
    args = p.parse_args()
    host, port = args.electrum.rsplit(":", 1)
    args.electrum = (host, int(port))
    if args.http:
        host, port = args.http.rsplit(":", 1)
        args.http = (host, int(port))
    stop, tally, threads = threading.Event(), Tally(), []
    for k, kind in enumerate(KINDS):
        if kind == "http" and not args.http:
            continue
        for i in range(args.per):
            src = f"127.0.{10 + k}.{1 + i % 2}"
            t = threading.Thread(target=attacker, args=(kind, src, args, stop, tally), daemon=True)
            t.start()
            threads.append(t)
    time.sleep(args.seconds)
    stop.set()
    time.sleep(2)
    print(json.dumps(tally.counts, sort_keys=True))


if __name__ == "__main__":
    main()
