//! A raw newline-JSON Electrum client for tests: answers matched by id, notifications kept.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A raw newline-JSON client: answers are matched by id, notifications kept aside.
pub struct Lines {
    /// The socket, for writing raw bytes.
    pub s: TcpStream,
    r: BufReader<TcpStream>,
    /// Notifications read while waiting for answers, not yet taken.
    pub notes: Vec<Value>,
    id: u64,
}

impl Lines {
    /// Connects and negotiates `version` (offering 1.4 to it).
    pub fn connect(addr: SocketAddr, version: &str) -> Lines {
        Lines::over(TcpStream::connect(addr).unwrap(), version)
    }

    /// Connects from `local_ip` (another loopback address, say 127.0.0.2, which the per-host
    /// limits count) and negotiates `version` (offering 1.4 to it).
    pub fn connect_from(local_ip: &str, addr: SocketAddr, version: &str) -> Lines {
        let s = super::peer::connect_from_with_rcvbuf(local_ip, addr, None)
            .unwrap_or_else(|e| panic!("connecting from {local_ip} to {addr}: {e}"));
        Lines::over(s, version)
    }

    /// The client on a connected socket: negotiates `version` (offering 1.4 to it).
    fn over(s: TcpStream, version: &str) -> Lines {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let r = BufReader::new(s.try_clone().unwrap());
        let mut lines = Lines {
            s,
            r,
            notes: Vec::new(),
            id: 0,
        };
        let v = lines.call("server.version", json!(["lines", ["1.4", version]]));
        assert_eq!(v["result"][1], version, "{v}");
        lines
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        self.r.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    /// The whole answer (with `result` or `error`) to one request.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let req = json!({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params});
        self.s.write_all(format!("{req}\n").as_bytes()).unwrap();
        loop {
            let v = self.read();
            if v.get("id").is_some() {
                assert_eq!(v["id"], self.id, "answers come in order: {v}");
                return v;
            }
            self.notes.push(v);
        }
    }

    /// The answer to one request, or `None` when the server closed the connection (or broke
    /// off a line) instead.
    pub fn try_call(&mut self, method: &str, params: Value) -> Option<Value> {
        self.id += 1;
        let req = json!({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params});
        self.s.write_all(format!("{req}\n").as_bytes()).ok()?;
        loop {
            let mut line = String::new();
            if self.r.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let v: Value = serde_json::from_str(&line).ok()?;
            if v.get("id").is_some() {
                return Some(v);
            }
            self.notes.push(v);
        }
    }

    /// Sends one raw line holding a batch and returns its answers (notifications read
    /// meanwhile set aside).
    pub fn raw_batch(&mut self, line: &str) -> Vec<Value> {
        self.s.write_all(line.as_bytes()).unwrap();
        loop {
            match self.read() {
                Value::Array(answers) => return answers,
                note => self.notes.push(note),
            }
        }
    }

    /// The next notification of `method` (pings and others set aside), within 30 s.
    pub fn note(&mut self, method: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(i) = self.notes.iter().position(|n| n["method"] == method) {
                return self.notes.remove(i);
            }
            assert!(
                Instant::now() < deadline,
                "no {method} notification; got {:?}",
                self.notes
            );
            let v = self.read();
            assert!(v.get("id").is_none(), "an answer nobody asked for: {v}");
            self.notes.push(v);
        }
    }
}

impl Lines {
    /// The next notification (set-aside ones first), or `None` if none comes within `within`.
    pub fn next_note(&mut self, within: Duration) -> Option<Value> {
        if !self.notes.is_empty() {
            return Some(self.notes.remove(0));
        }
        self.s.set_read_timeout(Some(within)).unwrap();
        let mut line = String::new();
        let read = self.r.read_line(&mut line);
        self.s
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        match read {
            Ok(n) if n > 0 => {
                Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}")))
            }
            _ => None,
        }
    }
}

impl Lines {
    /// Reads what the server sends until it closes the connection or `within` passes: the
    /// notifications (the ones set aside first) and how long the server took to close (`None`:
    /// still open).
    pub fn watch(&mut self, within: Duration) -> (Vec<Value>, Option<Duration>) {
        let start = Instant::now();
        self.s
            .set_read_timeout(Some(Duration::from_millis(250)))
            .unwrap();
        let (mut read, closed) = super::probe::watch(&mut self.r, start + within);
        let _ = self.s.set_read_timeout(Some(Duration::from_secs(30)));
        let mut notes = std::mem::take(&mut self.notes);
        notes.append(&mut read);
        (notes, closed.map(|at| at - start))
    }
}
