//! A minimal HTTP/1.1 client over a plain socket, for the HTTP server's tests: one request per
//! connection, the answer read to its end.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

/// Sends `request` as is; returns the status (0 if none came), the head and the body bytes.
pub fn raw(addr: SocketAddr, request: &[u8]) -> (u16, String, Vec<u8>) {
    let s = std::net::TcpStream::connect(addr).unwrap();
    exchange(s, request)
}

/// [`raw`] from the address `from`.
pub fn raw_from(from: &str, addr: SocketAddr, request: &[u8]) -> (u16, String, Vec<u8>) {
    let s = super::peer::connect_from_with_rcvbuf(from, addr, None).unwrap();
    exchange(s, request)
}

/// `request` on `s`, and the answer: status, head and body bytes.
fn exchange(mut s: std::net::TcpStream, request: &[u8]) -> (u16, String, Vec<u8>) {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // A server that closes at once (over its connection limit) may refuse the write too.
    let _ = s.write_all(request);
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n");
    let (head, body) = match split {
        Some(at) => (
            String::from_utf8_lossy(&answer[..at]).to_string(),
            answer[at + 4..].to_vec(),
        ),
        None => (String::from_utf8_lossy(&answer).to_string(), Vec::new()),
    };
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head, body)
}

/// A request given as text; the body as text.
pub fn text(addr: SocketAddr, request: &str) -> (u16, String, String) {
    let (status, head, body) = raw(addr, request.as_bytes());
    (status, head, String::from_utf8_lossy(&body).to_string())
}

/// `GET path`; the body as text.
pub fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    text(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
    )
}

/// `GET path`; the body's bytes.
pub fn get_bytes(addr: SocketAddr, path: &str) -> (u16, Vec<u8>) {
    let (status, _, body) = raw(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    (status, body)
}

/// `POST path` with `body`; the answer's body as text.
pub fn post(addr: SocketAddr, path: &str, body: &str) -> (u16, String, String) {
    text(
        addr,
        &format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()),
    )
}

/// [`post`] from the address `from`.
pub fn post_from(from: &str, addr: SocketAddr, path: &str, body: &str) -> (u16, String, String) {
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (status, head, body) = raw_from(from, addr, request.as_bytes());
    (status, head, String::from_utf8_lossy(&body).to_string())
}
