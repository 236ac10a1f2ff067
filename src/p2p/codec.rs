//! P2P message framing: `[magic][command][length][checksum][payload]`, with a size limit read
//! before any payload byte is allocated. Blocks stay raw bytes (they go to the kernel as they
//! came); every other message is decoded by the `bitcoin` crate.

use bitcoin::hashes::{sha256d, Hash};
use bitcoin::hex::DisplayHex;
use bitcoin::p2p::message::{NetworkMessage, RawNetworkMessage};
use bitcoin::p2p::Magic;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Core's limit on one message's payload (MAX_PROTOCOL_MESSAGE_LENGTH).
pub const MAX_PAYLOAD: u32 = 4_000_000;

/// The largest payload a command can have when its content is within Core's limits: a peer
/// cannot make cairn hold 4 MB for a `ping`. Commands whose limit the session checks after
/// decoding (`getheaders` locators: a disconnect without a ban, as Core) and ones cairn does not
/// know keep [`MAX_PAYLOAD`].
pub fn max_payload(command: &str) -> u32 {
    const SMALL: u32 = 1_000;
    match command {
        // 2,000 headers of 81 bytes (Core's MAX_HEADERS_RESULTS), CompactSize count.
        "headers" => 3 + 2_000 * 81,
        // 50,000 entries of 36 bytes (Core's MAX_INV_SZ).
        "inv" | "getdata" | "notfound" => 5 + 50_000 * 36,
        // 1,000 addresses (Core's MAX_ADDR_TO_SEND): 30 bytes each, or at most 537 in addrv2
        // (time, services, network, a 512-byte address at most, port).
        "addr" => 3 + 1_000 * 30,
        "addrv2" => 3 + 1_000 * (4 + 9 + 1 + 9 + 512 + 2),
        // A user agent of at most 256 bytes (Core's MAX_SUBVERSION_LENGTH) and fixed fields.
        "version" | "ping" | "pong" | "verack" | "getaddr" | "mempool" | "sendheaders"
        | "sendaddrv2" | "wtxidrelay" | "feefilter" | "sendcmpct" | "getcfilters"
        | "getcfheaders" | "getcfcheckpt" => SMALL,
        _ => MAX_PAYLOAD,
    }
}

/// Why a peer's bytes were refused.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The connection failed or closed.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The message is for another network.
    #[error("wrong network magic {0}")]
    BadMagic(String),
    /// The length field is over the limit.
    #[error(
        "oversized message: {command} of {len} bytes (limit {})",
        max_payload(command)
    )]
    Oversized {
        /// The command.
        command: String,
        /// The length it claims.
        len: u32,
    },
    /// The payload does not match its checksum.
    #[error("bad checksum on {0}")]
    BadChecksum(String),
    /// A BIP324 handshake or packet failed (a wrong key, no garbage terminator, a packet that
    /// does not authenticate): the connection is dropped, as Core drops it, without a ban.
    #[error("v2 transport: {0}")]
    Transport(String),
    /// The payload does not decode as its command says.
    #[error("malformed {command}: {message}")]
    Malformed {
        /// The command.
        command: String,
        /// The decoder's message.
        message: String,
    },
}

/// A message from a peer.
#[derive(Debug)]
pub enum Incoming {
    /// A `block`, as its serialized bytes.
    Block(Vec<u8>),
    /// Anything else, decoded.
    Message(NetworkMessage),
}

fn command_name(raw: &[u8; 12]) -> String {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(12);
    String::from_utf8_lossy(&raw[..end]).into_owned()
}

/// Reads one message.
pub async fn read_message<R: AsyncRead + Unpin>(
    reader: &mut R,
    magic: Magic,
) -> Result<Incoming, CodecError> {
    read_within(reader, magic, None)
        .await
        .map(|(message, _)| message)
}

/// Bytes read from one peer and not yet handled, at most (Core's `-maxreceivebuffer`, 5,000 kB):
/// past it cairn stops reading from that peer until the session has caught up.
pub const RECV_BUDGET: u32 = 5_000_000;

/// One peer's receive budget ([`RECV_BUDGET`]).
#[derive(Clone)]
pub struct RecvBudget(std::sync::Arc<tokio::sync::Semaphore>);

impl Default for RecvBudget {
    fn default() -> Self {
        RecvBudget(std::sync::Arc::new(tokio::sync::Semaphore::new(
            RECV_BUDGET as usize,
        )))
    }
}

/// A message's share of its peer's [`RecvBudget`], given back when dropped (once handled).
pub struct Held(#[allow(dead_code)] Option<tokio::sync::OwnedSemaphorePermit>);

impl RecvBudget {
    /// Waits until `len` bytes (a header's worth at least) fit in the budget.
    pub(super) async fn acquire(&self, len: u32) -> Held {
        let want = len.clamp(24, RECV_BUDGET);
        // The semaphore is never closed, so acquiring only waits.
        Held(self.0.clone().acquire_many_owned(want).await.ok())
    }
}

/// Reads one message, first taking its size out of `budget` (when given): the returned share is
/// given back when the caller drops it, after handling the message.
pub async fn read_within<R: AsyncRead + Unpin>(
    reader: &mut R,
    magic: Magic,
    budget: Option<&RecvBudget>,
) -> Result<(Incoming, Option<Held>), CodecError> {
    let mut head = [0u8; 24];
    reader.read_exact(&mut head).await?;
    if head[..4] != magic.to_bytes() {
        return Err(CodecError::BadMagic(head[..4].to_lower_hex_string()));
    }
    let mut cmd = [0u8; 12];
    cmd.copy_from_slice(&head[4..16]);
    let command = command_name(&cmd);
    let len = u32::from_le_bytes([head[16], head[17], head[18], head[19]]);
    if len > max_payload(&command) {
        return Err(CodecError::Oversized { command, len });
    }
    let held = match budget {
        Some(budget) => Some(budget.acquire(len).await),
        None => None,
    };
    // Grown as bytes arrive: a length field alone does not make cairn allocate.
    let mut payload = Vec::with_capacity((len as usize).min(64 * 1024));
    (&mut *reader)
        .take(u64::from(len))
        .read_to_end(&mut payload)
        .await?;
    if payload.len() != len as usize {
        return Err(CodecError::Io(std::io::ErrorKind::UnexpectedEof.into()));
    }
    let checksum = sha256d::Hash::hash(&payload);
    if checksum.as_byte_array()[..4] != head[20..24] {
        return Err(CodecError::BadChecksum(command));
    }
    Ok((decode_framed(&command, head, payload)?, held))
}

/// A message from its command and payload (a v2 packet's contents): framed as v1 for the
/// `bitcoin` crate's decoder.
pub fn decode(magic: Magic, command: &str, payload: Vec<u8>) -> Result<Incoming, CodecError> {
    let mut head = [0u8; 24];
    head[..4].copy_from_slice(&magic.to_bytes());
    let name = command.as_bytes();
    if name.len() > 12 {
        return Err(CodecError::Malformed {
            command: command.into(),
            message: "command over 12 bytes".into(),
        });
    }
    head[4..4 + name.len()].copy_from_slice(name);
    head[16..20].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    if command != "block" {
        head[20..24].copy_from_slice(&sha256d::Hash::hash(&payload).as_byte_array()[..4]);
    }
    decode_framed(command, head, payload)
}

/// A message whose header (checked) and payload were read: a block stays bytes, the rest is
/// decoded.
fn decode_framed(command: &str, head: [u8; 24], payload: Vec<u8>) -> Result<Incoming, CodecError> {
    if command == "block" {
        return Ok(Incoming::Block(payload));
    }
    let mut whole = Vec::with_capacity(24 + payload.len());
    whole.extend_from_slice(&head);
    whole.extend_from_slice(&payload);
    let raw: RawNetworkMessage =
        bitcoin::consensus::deserialize(&whole).map_err(|e| CodecError::Malformed {
            command: command.into(),
            message: e.to_string(),
        })?;
    Ok(Incoming::Message(raw.into_payload()))
}

/// Encodes `message` as v1 into `buf` (cleared first); returns its command. The payload is
/// `buf[24..]`, which is what a v2 packet carries.
pub fn encode_v1(message: NetworkMessage, buf: &mut Vec<u8>) -> Result<String, CodecError> {
    use bitcoin::consensus::Encodable;
    let raw = RawNetworkMessage::new(Magic::BITCOIN, message);
    buf.clear();
    raw.consensus_encode(buf)
        .map_err(|e| CodecError::Io(std::io::Error::other(e.to_string())))?;
    let mut name = [0u8; 12];
    name.copy_from_slice(buf.get(4..16).unwrap_or(&[0; 12]));
    Ok(command_name(&name))
}

/// Writes one message.
pub async fn write_message<W: AsyncWrite + Unpin>(
    writer: &mut W,
    magic: Magic,
    message: NetworkMessage,
) -> Result<(), CodecError> {
    write_message_with(writer, magic, message, &mut Vec::new()).await
}

/// As [`write_message`], encoding into `buf` (cleared first, kept by the caller): a connection
/// that reuses one buffer allocates nothing per message once the buffer has grown, however many
/// hashes or filters a message carries. A buffer grown past 1 MiB is shrunk back afterwards.
pub async fn write_message_with<W: AsyncWrite + Unpin>(
    writer: &mut W,
    magic: Magic,
    message: NetworkMessage,
    buf: &mut Vec<u8>,
) -> Result<(), CodecError> {
    use bitcoin::consensus::Encodable;
    // The header's length and checksum are hashed from the payload without a buffer.
    let raw = RawNetworkMessage::new(magic, message);
    buf.clear();
    raw.consensus_encode(buf)
        .map_err(|e| CodecError::Io(std::io::Error::other(e.to_string())))?;
    writer.write_all(buf).await?;
    if buf.capacity() > 1 << 20 {
        buf.clear();
        buf.shrink_to(64 << 10);
    }
    Ok(())
}

/// Writes a `block` message from serialized block bytes (no decode, no re-encode).
pub async fn write_raw_block<W: AsyncWrite + Unpin>(
    writer: &mut W,
    magic: Magic,
    block: &[u8],
) -> Result<(), CodecError> {
    let mut head = [0u8; 24];
    head[..4].copy_from_slice(&magic.to_bytes());
    head[4..9].copy_from_slice(b"block");
    head[16..20].copy_from_slice(&(block.len() as u32).to_le_bytes());
    head[20..24].copy_from_slice(&sha256d::Hash::hash(block).as_byte_array()[..4]);
    writer.write_all(&head).await?;
    writer.write_all(block).await?;
    Ok(())
}

/// A message waiting in a peer's queue to be written.
pub enum Outgoing {
    /// A decoded message.
    Message(NetworkMessage),
    /// A block as serialized bytes.
    Block(Vec<u8>),
}

/// Writes one queued message; `buf` is reused for encoding.
pub async fn write_outgoing<W: AsyncWrite + Unpin>(
    writer: &mut W,
    magic: Magic,
    item: Outgoing,
    buf: &mut Vec<u8>,
) -> Result<(), CodecError> {
    match item {
        Outgoing::Message(m) => write_message_with(writer, magic, m, buf).await,
        Outgoing::Block(b) => write_raw_block(writer, magic, &b).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn round_trip_and_limits() {
        let magic = Magic::REGTEST;
        let mut buf = Vec::new();
        write_message(&mut buf, magic, NetworkMessage::Ping(7))
            .await
            .unwrap();
        let genesis = bitcoin::blockdata::constants::genesis_block(bitcoin::Network::Regtest);
        let raw_block = bitcoin::consensus::serialize(&genesis);
        write_raw_block(&mut buf, magic, &raw_block).await.unwrap();
        let mut r = buf.as_slice();
        assert!(matches!(
            read_message(&mut r, magic).await.unwrap(),
            Incoming::Message(NetworkMessage::Ping(7))
        ));
        match read_message(&mut r, magic).await.unwrap() {
            Incoming::Block(b) => assert_eq!(b, raw_block),
            other => panic!("{other:?}"),
        }
        // Oversized: refused from the header alone.
        let mut big = Vec::new();
        big.extend_from_slice(&magic.to_bytes());
        big.extend_from_slice(b"block\0\0\0\0\0\0\0");
        big.extend_from_slice(&(MAX_PAYLOAD + 1).to_le_bytes());
        big.extend_from_slice(&[0; 4]);
        assert!(matches!(
            read_message(&mut big.as_slice(), magic).await,
            Err(CodecError::Oversized { .. })
        ));
        // Wrong magic and bad checksum.
        let mut other = Vec::new();
        write_message(&mut other, Magic::BITCOIN, NetworkMessage::Verack)
            .await
            .unwrap();
        assert!(matches!(
            read_message(&mut other.as_slice(), magic).await,
            Err(CodecError::BadMagic(_))
        ));
        let mut bad = Vec::new();
        write_message(&mut bad, magic, NetworkMessage::Ping(1))
            .await
            .unwrap();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(matches!(
            read_message(&mut bad.as_slice(), magic).await,
            Err(CodecError::BadChecksum(_))
        ));
    }
}
