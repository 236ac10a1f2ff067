//! A scripted P2P peer for tests: the bitcoin crate's messages over a blocking socket, from a
//! chosen local address.
#![allow(dead_code)]

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// A `ping` whose checksum is wrong.
pub fn bad_checksum_ping() -> Vec<u8> {
    let mut msg = Vec::new();
    msg.extend_from_slice(&[0xfa, 0xbf, 0xb5, 0xda]);
    msg.extend_from_slice(b"ping\0\0\0\0\0\0\0\0");
    msg.extend_from_slice(&8u32.to_le_bytes());
    msg.extend_from_slice(&[1, 2, 3, 4]);
    msg.extend_from_slice(&[0u8; 8]);
    msg
}

/// Whether connections from `from` are refused (closed before a handshake) within 5 s: the ban
/// is written as the misbehaving peer's connection ends, so the first try can come first.
pub fn banned_within(from: &str, to: SocketAddr) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if ScriptedPeer::connect(from, to).try_handshake().is_none() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// This machine's address on its default route: a peer from it is not local to cairn, as a
/// peer from another host would not be (`CNetAddr::IsLocal` only covers 127/8 and 0/8).
pub fn non_loopback_ip() -> String {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    // A UDP connect only picks the route; nothing is sent.
    socket
        .connect("198.51.100.1:9")
        .expect("this test needs an IPv4 address besides loopback (a default route)");
    let ip = socket.local_addr().unwrap().ip();
    assert!(
        !ip.is_loopback() && !ip.is_unspecified(),
        "no non-loopback address: {ip}"
    );
    ip.to_string()
}

/// A blocking stream connected from a chosen local address (another loopback IP, or
/// [`non_loopback_ip`]).
pub fn connect_from(local_ip: &str, to: SocketAddr) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local: SocketAddr = format!("{local_ip}:0").parse().unwrap();
    let stream = rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(local).unwrap();
        socket.connect(to).await.unwrap()
    });
    let std_stream = stream.into_std().unwrap();
    std_stream.set_nonblocking(false).unwrap();
    std_stream
}

/// One runtime for every socket [`connect_from_with_rcvbuf`] opens: a runtime per socket (as
/// [`connect_from`] builds) is too slow for the hundreds the attack tests open.
fn connector() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    })
}

async fn connect_bound(
    local: SocketAddr,
    to: SocketAddr,
    rcvbuf: Option<u32>,
) -> std::io::Result<tokio::net::TcpStream> {
    let socket = match local {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.bind(local)?;
    if let Some(size) = rcvbuf {
        // Before connect, so the window the client offers stays this small.
        socket.set_recv_buffer_size(size)?;
    }
    socket.connect(to).await
}

/// A blocking stream connected from `local_ip` (any port), with its receive buffer set to
/// `rcvbuf` bytes before connecting when given (Linux doubles it), on one shared runtime; an
/// error instead of a panic, for a caller that counts failures.
pub fn connect_from_with_rcvbuf(
    local_ip: &str,
    to: SocketAddr,
    rcvbuf: Option<u32>,
) -> std::io::Result<TcpStream> {
    let ip: std::net::IpAddr = local_ip.parse().map_err(std::io::Error::other)?;
    let local = SocketAddr::new(ip, 0);
    let stream = connector().block_on(connect_bound(local, to, rcvbuf))?;
    let std_stream = stream.into_std()?;
    std_stream.set_nonblocking(false)?;
    Ok(std_stream)
}

/// The next connection cairn makes to `listener` that starts in v1 (within 30 s), as a v1-only
/// node sees it: a BIP324 handshake (64 bytes that are not the network magic) is closed, as
/// such a node closes it, and cairn dials again with v1.
pub fn accept_v1(listener: &std::net::TcpListener) -> TcpStream {
    let start = Instant::now();
    listener.set_nonblocking(true).unwrap();
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(20)))
                    .unwrap();
                let mut first = [0u8; 4];
                if stream.peek(&mut first).is_ok_and(|n| n == 4)
                    && first == ScriptedPeer::MAGIC.to_bytes()
                {
                    return stream;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "cairn never dialled with v1"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// A scripted peer speaking the bitcoin crate's P2P messages over a blocking socket.
pub struct ScriptedPeer {
    /// The connection.
    pub stream: TcpStream,
    reader: bitcoin::io::FromStd<std::io::BufReader<TcpStream>>,
    /// The network magic it sends ([`ScriptedPeer::MAGIC`] unless [`ScriptedPeer::on`] says).
    magic: bitcoin::p2p::Magic,
}

impl ScriptedPeer {
    /// Regtest.
    pub const MAGIC: bitcoin::p2p::Magic = bitcoin::p2p::Magic::REGTEST;

    pub fn connect(local_ip: &str, to: SocketAddr) -> Self {
        Self::over(connect_from(local_ip, to))
    }

    /// A scripted peer on a connection made either way.
    pub fn over(stream: TcpStream) -> Self {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let reader =
            bitcoin::io::FromStd::new(std::io::BufReader::new(stream.try_clone().unwrap()));
        ScriptedPeer {
            stream,
            reader,
            magic: Self::MAGIC,
        }
    }

    /// The peer, speaking on the network of `magic`.
    pub fn on(mut self, magic: bitcoin::p2p::Magic) -> Self {
        self.magic = magic;
        self
    }

    pub fn send(&mut self, msg: bitcoin::p2p::message::NetworkMessage) -> std::io::Result<()> {
        let raw = bitcoin::p2p::message::RawNetworkMessage::new(self.magic, msg);
        self.stream.write_all(&bitcoin::consensus::serialize(&raw))
    }

    pub fn recv(&mut self) -> Option<bitcoin::p2p::message::NetworkMessage> {
        use bitcoin::consensus::Decodable;
        let raw =
            bitcoin::p2p::message::RawNetworkMessage::consensus_decode(&mut self.reader).ok()?;
        Some(raw.payload().clone())
    }

    /// Version, verack; returns the messages cairn sent during the handshake.
    pub fn handshake(&mut self) -> Vec<bitcoin::p2p::message::NetworkMessage> {
        self.try_handshake().expect("handshake reply")
    }

    /// Sends a ping and reads until its pong: whether it came (cairn handles a peer's messages
    /// in order, so everything sent before was handled).
    pub fn pinged(&mut self, nonce: u64) -> bool {
        use bitcoin::p2p::message::NetworkMessage;
        self.send(NetworkMessage::Ping(nonce)).is_ok()
            && self
                .recv_until(|m| matches!(m, NetworkMessage::Pong(n) if *n == nonce).then_some(()))
                .is_some()
    }

    /// Waits for cairn's ping and answers it, as a well-behaved peer does (its round trip then
    /// counts for it when inbound places are scarce).
    pub fn answer_ping(&mut self) -> bool {
        use bitcoin::p2p::message::NetworkMessage;
        let nonce = self.recv_until(|m| match m {
            NetworkMessage::Ping(n) => Some(*n),
            _ => None,
        });
        nonce.is_some_and(|n| self.send(NetworkMessage::Pong(n)).is_ok())
    }

    /// A second `version` after the handshake: misbehaviour Core bans for.
    pub fn send_second_version(&mut self) -> std::io::Result<()> {
        self.send(bitcoin::p2p::message::NetworkMessage::Version(
            Self::version(),
        ))
    }

    /// The handshake, claiming in `version` to have the chain up to `start_height`.
    pub fn handshake_claiming(
        &mut self,
        start_height: i32,
    ) -> Option<Vec<bitcoin::p2p::message::NetworkMessage>> {
        use bitcoin::p2p::message::NetworkMessage;
        let mut v = Self::version();
        v.start_height = start_height;
        self.send(NetworkMessage::Version(v)).ok()?;
        self.send(NetworkMessage::Verack).ok()?;
        let mut seen = Vec::new();
        while !seen.iter().any(|m| matches!(m, NetworkMessage::Verack)) {
            seen.push(self.recv()?);
        }
        Some(seen)
    }

    /// The handshake, its version naming `user_agent`.
    pub fn handshake_as(
        &mut self,
        user_agent: &str,
    ) -> Option<Vec<bitcoin::p2p::message::NetworkMessage>> {
        use bitcoin::p2p::message::NetworkMessage;
        let mut v = Self::version();
        v.user_agent = user_agent.into();
        self.send(NetworkMessage::Version(v)).ok()?;
        self.send(NetworkMessage::Verack).ok()?;
        let mut seen = Vec::new();
        while !seen.iter().any(|m| matches!(m, NetworkMessage::Verack)) {
            seen.push(self.recv()?);
        }
        Some(seen)
    }

    /// The version message a scripted peer sends.
    fn version() -> bitcoin::p2p::message_network::VersionMessage {
        use bitcoin::p2p::{address::Address, message_network::VersionMessage, ServiceFlags};
        let any: SocketAddr = "0.0.0.0:0".parse().unwrap();
        let mut v = VersionMessage::new(
            ServiceFlags::NETWORK | ServiceFlags::WITNESS,
            0,
            Address::new(&any, ServiceFlags::NONE),
            Address::new(&any, ServiceFlags::NONE),
            7,
            "/scripted:0.1/".into(),
            0,
        );
        v.version = 70016;
        v
    }

    /// The handshake, or `None` if cairn closes the connection instead.
    pub fn try_handshake(&mut self) -> Option<Vec<bitcoin::p2p::message::NetworkMessage>> {
        self.try_handshake_announcing(Self::version().services)
    }

    /// [`ScriptedPeer::try_handshake`], announcing `services` in `version`.
    pub fn try_handshake_announcing(
        &mut self,
        services: bitcoin::p2p::ServiceFlags,
    ) -> Option<Vec<bitcoin::p2p::message::NetworkMessage>> {
        use bitcoin::p2p::message::NetworkMessage;
        let mut version = Self::version();
        version.services = services;
        self.send(NetworkMessage::Version(version)).ok()?;
        self.send(NetworkMessage::Verack).ok()?;
        let mut seen = Vec::new();
        while !seen.iter().any(|m| matches!(m, NetworkMessage::Verack)) {
            seen.push(self.recv()?);
        }
        Some(seen)
    }

    /// Whether cairn closes the connection within `within`; what it sends meanwhile is skipped.
    /// (Silence is not a close: a read timeout answers false.)
    pub fn is_closed_within(&mut self, within: Duration) -> bool {
        use bitcoin::consensus::Decodable;
        self.stream
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            match bitcoin::p2p::message::RawNetworkMessage::consensus_decode(&mut self.reader) {
                Ok(_) => {}
                Err(bitcoin::consensus::encode::Error::Io(e))
                    if matches!(
                        e.kind(),
                        bitcoin::io::ErrorKind::WouldBlock | bitcoin::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return true,
            }
        }
        false
    }

    /// Reads until a message matches, or fails after 20 s of silence.
    pub fn recv_until<T>(
        &mut self,
        mut pick: impl FnMut(&bitcoin::p2p::message::NetworkMessage) -> Option<T>,
    ) -> Option<T> {
        loop {
            let m = self.recv()?;
            if let Some(t) = pick(&m) {
                return Some(t);
            }
        }
    }
}

/// `n` regtest headers in a chain on `prev` (known or not), each with valid proof of work (half
/// of all hashes meet regtest's target), times a second apart from `time`.
pub fn mined_headers(
    prev: bitcoin::BlockHash,
    time: u32,
    n: usize,
    salt: u8,
) -> Vec<bitcoin::block::Header> {
    use bitcoin::hashes::Hash;
    let mut out: Vec<bitcoin::block::Header> = Vec::with_capacity(n);
    for i in 0..n {
        let mut h = bitcoin::block::Header {
            version: bitcoin::block::Version::from_consensus(0x2000_0000),
            prev_blockhash: out.last().map_or(prev, |p| p.block_hash()),
            merkle_root: bitcoin::TxMerkleNode::from_byte_array([salt; 32]),
            time: time + i as u32,
            bits: bitcoin::CompactTarget::from_consensus(0x207f_ffff),
            nonce: i as u32,
        };
        while !h.target().is_met_by(h.block_hash()) {
            h.nonce = h.nonce.wrapping_add(1 << 20);
        }
        out.push(h);
    }
    out
}

/// A block on `parent` with valid proof of work (regtest) whose merkle root does not match its
/// only transaction: a header the kernel takes, a block it finds invalid.
pub fn invalid_block_on(parent: &bitcoin::block::Header) -> bitcoin::Block {
    use bitcoin::hashes::Hash;
    let coinbase = bitcoin::Transaction {
        version: bitcoin::transaction::Version::ONE,
        lock_time: bitcoin::absolute::LockTime::ZERO,
        input: vec![bitcoin::TxIn {
            script_sig: bitcoin::ScriptBuf::from_bytes(vec![0x51, 0x51]),
            ..Default::default()
        }],
        output: vec![bitcoin::TxOut {
            value: bitcoin::Amount::from_sat(50 * 100_000_000),
            script_pubkey: bitcoin::ScriptBuf::new(),
        }],
    };
    let mut header = bitcoin::block::Header {
        version: bitcoin::block::Version::from_consensus(0x2000_0000),
        prev_blockhash: parent.block_hash(),
        merkle_root: bitcoin::TxMerkleNode::from_byte_array([7; 32]),
        time: parent.time + 600,
        bits: bitcoin::CompactTarget::from_consensus(0x207fffff),
        nonce: 0,
    };
    while header.validate_pow(header.target()).is_err() {
        header.nonce += 1;
    }
    bitcoin::Block {
        header,
        txdata: vec![coinbase],
    }
}
