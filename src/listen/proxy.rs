//! The PROXY protocol, versions 1 and 2 (HAProxy's `doc/proxy-protocol.txt`): a balancer in
//! front of cairn (HAProxy's `send-proxy` or `send-proxy-v2`) opens each connection with a
//! header naming the client it carries, so that the client's address, not the balancer's, is
//! the host every per-host limit, cost account, ban, log line and metric counts.
//!
//! A header is taken only from the balancers `proxy_protocol_from` lists, and from them it is
//! required: a connection of theirs without one, or with a malformed or over-long one, or
//! whose header has not arrived within [`HEADER_TIMEOUT`], is closed. Exactly the header is
//! read (byte by byte up to the line's end for version 1, its stated length for version 2), so
//! what the client sent after it is left for the server. A `LOCAL` header (the balancer's own
//! health check) and one of an unknown or UNIX family stand for the balancer itself, as the
//! specification asks. At most [`PENDING`] connections of every balancer together may be
//! waiting for their header at once; a connection beyond is closed at accept.
//!
//! The parsing is the `ppp` crate's; reading, bounds and what a header means for cairn are
//! here.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ppp::{v1, v2, HeaderResult};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::types::Subnet;

/// How long a balancer may take to send a connection's header: it sends it as it connects.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(3);
/// Connections of the balancers waiting for their header at once, over every balancer of one
/// service (Electrum's listeners together, HTTP's, P2P's).
pub const PENDING: usize = 256;
/// A version 2 header's fixed part: its signature, version and command, family and protocol,
/// and the length of what follows.
const V2_FIXED: usize = 16;
/// The longest version 1 header, its line end included (the specification's 107 bytes).
const V1_MAX: usize = 107;
/// The most bytes of a version 2 header read: its 16 fixed bytes, then addresses and TLVs
/// (HAProxy sends 12 address bytes for IPv4, 36 for IPv6, and TLVs only when configured to:
/// its SSL, unique-id and authority TLVs together stay far below); a header that says it is
/// longer is refused unread.
pub const MAX_HEADER: usize = 16 + 1024;

/// Who a connection from a balancer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proxied {
    /// A client, at this address.
    Client(SocketAddr),
    /// The balancer itself (a `LOCAL` header: its health check; or an address family cairn
    /// cannot count, which stands for the connection's own end).
    Balancer,
}

/// Why a balancer's connection was closed before it was served.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// Nothing whole arrived in time.
    #[error("no PROXY header within {0:?}")]
    Timeout(Duration),
    /// The connection failed or closed first.
    #[error("reading the PROXY header: {0}")]
    Io(#[from] std::io::Error),
    /// Its first bytes are no PROXY header.
    #[error("the connection does not start with a PROXY header")]
    Missing,
    /// A header longer than cairn reads.
    #[error("a PROXY header over {0} bytes")]
    TooLong(usize),
    /// A header the parser refuses.
    #[error("a malformed PROXY header: {0}")]
    Malformed(String),
}

/// The balancers a listener takes PROXY headers from, and the places of their connections
/// still waiting for one.
#[derive(Debug, Clone)]
pub struct Balancers {
    trusted: Arc<Vec<Subnet>>,
    pending: Arc<Semaphore>,
}

impl Balancers {
    /// The balancers at `trusted` (`proxy_protocol_from`; none: no header is taken from
    /// anyone).
    pub fn new(trusted: Vec<Subnet>) -> Self {
        Balancers {
            trusted: Arc::new(trusted),
            pending: Arc::new(Semaphore::new(PENDING)),
        }
    }

    /// Whether connections from `ip` come from a balancer and open with a PROXY header.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.trusted.iter().any(|s| s.contains(ip))
    }

    /// A place for one more connection waiting for its header; `None` when [`PENDING`] are.
    pub fn wait_place(&self) -> Option<OwnedSemaphorePermit> {
        self.pending.clone().try_acquire_owned().ok()
    }
}

/// Reads exactly one PROXY header (version 1 or 2) from `stream`, within `timeout`, and says
/// who it carries.
pub async fn read_header<S: AsyncRead + Unpin>(
    stream: &mut S,
    timeout: Duration,
) -> Result<Proxied, ProxyError> {
    match tokio::time::timeout(timeout, read_whole(stream)).await {
        Ok(header) => parse(&header?),
        Err(_) => Err(ProxyError::Timeout(timeout)),
    }
}

/// Serves a balancer's connection once its header names the client: the header is read in a
/// task of its own, holding one of the balancers' [`PENDING`] waiting places, then `admit` gets
/// the connection and the client's address. The connection is closed at once when [`PENDING`]
/// wait already, and when its header is missing, malformed or late (counted in
/// `cairn_proxy_headers_refused_total{listener=what}`).
pub fn admit_after_header<F>(
    balancers: &Balancers,
    mut stream: TcpStream,
    balancer: SocketAddr,
    what: &'static str,
    admit: F,
) where
    F: FnOnce(TcpStream, SocketAddr) + Send + 'static,
{
    let Some(waiting) = balancers.wait_place() else {
        refused(what);
        return;
    };
    tokio::spawn(async move {
        let Some(client) = client_of(&mut stream, balancer, what).await else {
            return;
        };
        drop(waiting);
        admit(stream, client);
    });
}

/// The client a balancer's connection carries (the balancer itself for its own checks), or
/// `None` when its header is missing, malformed or late: the connection is then to be closed
/// (logged at debug, counted in `cairn_proxy_headers_refused_total` by listener).
async fn client_of<S: AsyncRead + Unpin>(
    stream: &mut S,
    balancer: SocketAddr,
    what: &'static str,
) -> Option<SocketAddr> {
    match read_header(stream, HEADER_TIMEOUT).await {
        Ok(Proxied::Client(client)) => Some(client),
        Ok(Proxied::Balancer) => Some(balancer),
        Err(e) => {
            tracing::debug!("{what}: balancer {balancer}: {e}");
            crate::metrics::metrics()
                .proxy_headers_refused
                .with_label_values(&[what])
                .inc();
            None
        }
    }
}

/// Counts a balancer's connection closed because [`PENDING`] wait for their headers already.
fn refused(what: &'static str) {
    tracing::debug!("{what}: too many balancer connections waiting for their PROXY header");
    crate::metrics::metrics()
        .proxy_headers_refused
        .with_label_values(&[what])
        .inc();
}

/// The bytes of one header, nothing after it.
async fn read_whole<S: AsyncRead + Unpin>(stream: &mut S) -> Result<Vec<u8>, ProxyError> {
    let mut header = vec![stream.read_u8().await?];
    match header[0] {
        b'P' => {
            while !header.ends_with(b"\r\n") {
                if header.len() == V1_MAX {
                    return Err(ProxyError::TooLong(V1_MAX));
                }
                header.push(stream.read_u8().await?);
            }
        }
        b'\r' => {
            header.resize(V2_FIXED, 0);
            stream.read_exact(&mut header[1..]).await?;
            if !header.starts_with(v2::PROTOCOL_PREFIX) {
                return Err(ProxyError::Missing);
            }
            let len = usize::from(u16::from_be_bytes([header[14], header[15]]));
            let whole = V2_FIXED + len;
            if whole > MAX_HEADER {
                return Err(ProxyError::TooLong(MAX_HEADER));
            }
            header.resize(whole, 0);
            stream.read_exact(&mut header[V2_FIXED..]).await?;
        }
        _ => return Err(ProxyError::Missing),
    }
    Ok(header)
}

/// Who a whole header (and nothing after it) carries.
pub fn parse(header: &[u8]) -> Result<Proxied, ProxyError> {
    let malformed = |e: &dyn std::fmt::Display| ProxyError::Malformed(e.to_string());
    match HeaderResult::parse(header) {
        HeaderResult::V1(Ok(h)) if h.header.len() == header.len() => match h.addresses {
            v1::Addresses::Tcp4(a) => client(a.source_address.into(), a.source_port),
            v1::Addresses::Tcp6(a) => client(a.source_address.into(), a.source_port),
            v1::Addresses::Unknown => Ok(Proxied::Balancer),
        },
        HeaderResult::V2(Ok(h)) if h.len() == header.len() => match (h.command, h.addresses) {
            (v2::Command::Proxy, v2::Addresses::IPv4(a)) => {
                client(a.source_address.into(), a.source_port)
            }
            (v2::Command::Proxy, v2::Addresses::IPv6(a)) => {
                client(a.source_address.into(), a.source_port)
            }
            _ => Ok(Proxied::Balancer),
        },
        HeaderResult::V1(Ok(_)) | HeaderResult::V2(Ok(_)) => {
            Err(ProxyError::Malformed("bytes after the header".into()))
        }
        HeaderResult::V1(Err(e)) => Err(malformed(&e)),
        HeaderResult::V2(Err(e)) => Err(malformed(&e)),
    }
}

fn client(ip: IpAddr, port: u16) -> Result<Proxied, ProxyError> {
    let ip = ip.to_canonical();
    // No client connects from an unspecified address; one named so would pass for local.
    if ip.is_unspecified() {
        return Err(ProxyError::Malformed(format!("client address {ip}")));
    }
    Ok(Proxied::Client(SocketAddr::new(ip, port)))
}

/// Whether a connection that opened with `opening` (its first bytes, up to 12) opened with a
/// PROXY header: `Some(true)` for `PROXY ` or version 2's whole signature, `Some(false)` for
/// anything else, `None` while `opening` is a shorter part of version 2's signature (blank
/// lines and a NUL: no request yet). From a client no balancer vouches for, such a connection
/// is closed, never answered as if the header were its request.
pub fn opens_with_header(opening: &[u8]) -> Option<bool> {
    if opening.starts_with(b"PROXY ") || opening.starts_with(v2::PROTOCOL_PREFIX) {
        return Some(true);
    }
    let n = opening.len().min(v2::PROTOCOL_PREFIX.len());
    match opening[..n] == v2::PROTOCOL_PREFIX[..n] {
        true if n < v2::PROTOCOL_PREFIX.len() => None,
        _ => Some(false),
    }
}

#[cfg(test)]
mod tests;
