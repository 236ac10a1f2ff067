//! BIP324, the encrypted v2 transport, through the `bip324` crate: the key exchange with
//! garbage and decoys, then packets whose contents are a message type (one byte from BIP324's
//! table, or 0 and the 12-byte v1 command) and the v1 payload. An inbound peer's first 16 bytes
//! tell a v1 peer (magic and `version`) from a v2 one, as Core's `V2Transport` does.
//!
//! Every length is checked before its bytes are read, and buffers grow as bytes arrive: a
//! peer's length field alone never makes cairn allocate.

use bip324::{
    GarbageResult, Handshake, InboundCipher, OutboundCipher, PacketType, Role, VersionResult,
};
use bitcoin::p2p::Magic;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::codec::{max_payload, CodecError, MAX_PAYLOAD};

/// An ElligatorSwift public key.
const KEY_BYTES: usize = 64;
/// The garbage terminator.
const TERMINATOR_BYTES: usize = 16;
/// Garbage a peer may send before its terminator (BIP324's limit).
const MAX_GARBAGE: usize = 4095;
/// The largest decoy or version packet cairn reads during the handshake (Core sends an empty
/// version packet and no decoys).
const MAX_HANDSHAKE_PACKET: usize = 64 * 1024;
/// A packet's header byte and authentication tag, around its contents.
pub const PACKET_OVERHEAD: usize = 1 + 16;
/// The longest contents: a long message type (1 + 12 bytes) and the largest payload.
pub const MAX_CONTENTS: usize = 13 + MAX_PAYLOAD as usize;

/// BIP324's one-byte message types; index 0 means a 12-byte command follows.
const SHORT_IDS: [&str; 29] = [
    "",
    "addr",
    "block",
    "blocktxn",
    "cmpctblock",
    "feefilter",
    "filteradd",
    "filterclear",
    "filterload",
    "getblocks",
    "getblocktxn",
    "getdata",
    "getheaders",
    "headers",
    "inv",
    "mempool",
    "merkleblock",
    "notfound",
    "ping",
    "pong",
    "sendcmpct",
    "tx",
    "getcfilters",
    "cfilter",
    "getcfheaders",
    "cfheaders",
    "getcfcheckpt",
    "cfcheckpt",
    "addrv2",
];

/// Whether an inbound peer's first 16 bytes are a v1 `version` message's start.
pub fn is_v1_version(first: &[u8; 16], magic: Magic) -> bool {
    first[..4] == magic.to_bytes() && &first[4..] == b"version\0\0\0\0\0"
}

/// The two ciphers of an established v2 session.
pub struct Ciphers {
    /// Decrypts what the peer sends.
    pub inbound: InboundCipher,
    /// Encrypts what cairn sends.
    pub outbound: OutboundCipher,
}

fn protocol_error(e: impl std::fmt::Display) -> CodecError {
    CodecError::Transport(format!("handshake: {e}"))
}

/// The key exchange, as `role`: sends cairn's key (no garbage), reads the peer's, sends the
/// terminator and version packet, then reads the peer's garbage (at most 4,095 bytes), its
/// terminator and its decoys up to its version packet. Bytes read past the version packet stay
/// in `reader`'s buffer for the first message.
pub async fn handshake<R, W>(
    magic: Magic,
    role: Role,
    reader: &mut R,
    writer: &mut W,
) -> Result<Ciphers, CodecError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let magic = magic.to_bytes();
    let start = Handshake::new(magic, role).map_err(protocol_error)?;
    let mut key = vec![0u8; Handshake::send_key_len(None)];
    let sent_key = start.send_key(None, &mut key).map_err(protocol_error)?;
    writer.write_all(&key).await?;
    writer.flush().await?;
    let mut theirs = [0u8; KEY_BYTES];
    reader.read_exact(&mut theirs).await?;
    let got_key = sent_key.receive_key(theirs).map_err(protocol_error)?;
    let mut version = vec![0u8; Handshake::<bip324::ReceivedKey>::send_version_len(None)];
    let sent_version = got_key
        .send_version(&mut version, None)
        .map_err(protocol_error)?;
    writer.write_all(&version).await?;
    writer.flush().await?;
    // Garbage and terminator: read a byte at a time past the terminator's length, so that no
    // byte of the packets after it is taken out of the reader.
    let mut garbage = vec![0u8; TERMINATOR_BYTES];
    reader.read_exact(&mut garbage).await?;
    let mut waiting = sent_version;
    let mut received = loop {
        match waiting.receive_garbage(&garbage).map_err(protocol_error)? {
            GarbageResult::FoundGarbage { handshake, .. } => break handshake,
            GarbageResult::NeedMoreData(h) if garbage.len() < MAX_GARBAGE + TERMINATOR_BYTES => {
                waiting = h;
                garbage.push(reader.read_u8().await?);
            }
            GarbageResult::NeedMoreData(_) => return Err(protocol_error("no garbage terminator")),
        }
    };
    loop {
        let mut len = [0u8; 3];
        reader.read_exact(&mut len).await?;
        let packet_len = received.decrypt_packet_len(len).map_err(protocol_error)?;
        if packet_len > MAX_HANDSHAKE_PACKET {
            return Err(CodecError::Oversized {
                command: "v2 handshake packet".into(),
                len: packet_len as u32,
            });
        }
        let mut packet = read_up_to(reader, packet_len).await?;
        match received
            .receive_version(&mut packet)
            .map_err(protocol_error)?
        {
            VersionResult::Complete { cipher } => {
                let (inbound, outbound) = cipher.into_split();
                return Ok(Ciphers { inbound, outbound });
            }
            VersionResult::Decoy(h) => received = h,
        }
    }
}

/// Reads exactly `len` bytes into a buffer grown as they arrive.
async fn read_up_to<R: AsyncRead + Unpin>(
    reader: &mut R,
    len: usize,
) -> Result<Vec<u8>, CodecError> {
    let mut bytes = Vec::with_capacity(len.min(64 * 1024));
    (&mut *reader)
        .take(len as u64)
        .read_to_end(&mut bytes)
        .await?;
    if bytes.len() != len {
        return Err(CodecError::Io(std::io::ErrorKind::UnexpectedEof.into()));
    }
    Ok(bytes)
}

/// The length of the next packet (header, contents and tag), checked against the largest
/// message before any of it is read.
pub async fn read_packet_len<R: AsyncRead + Unpin>(
    reader: &mut R,
    cipher: &mut InboundCipher,
) -> Result<usize, CodecError> {
    let mut len = [0u8; 3];
    reader.read_exact(&mut len).await?;
    let packet_len = cipher.decrypt_packet_len(len);
    if packet_len > MAX_CONTENTS + PACKET_OVERHEAD {
        return Err(CodecError::Oversized {
            command: "v2 packet".into(),
            len: packet_len as u32,
        });
    }
    Ok(packet_len)
}

/// Reads and decrypts the packet of `packet_len` bytes: `None` for a decoy, else the message's
/// command and payload (checked against the command's limit).
pub async fn read_packet_body<R: AsyncRead + Unpin>(
    reader: &mut R,
    cipher: &mut InboundCipher,
    packet_len: usize,
) -> Result<Option<(String, Vec<u8>)>, CodecError> {
    let mut packet = read_up_to(reader, packet_len).await?;
    let (kind, plain) = cipher
        .decrypt_in_place(&mut packet, None)
        .map_err(|e| CodecError::Transport(format!("packet: {e}")))?;
    if kind == PacketType::Decoy {
        return Ok(None);
    }
    let (command, payload) = split_contents(plain.get(1..).unwrap_or_default())?;
    if payload.len() > max_payload(&command) as usize {
        return Err(CodecError::Oversized {
            command,
            len: payload.len() as u32,
        });
    }
    Ok(Some((command, payload.to_vec())))
}

/// A message's contents: its type (short or long) and its payload; an unknown short type is
/// named `unknown-<id>` (no message cairn handles).
pub fn split_contents(contents: &[u8]) -> Result<(String, &[u8]), CodecError> {
    let malformed = |message: &str| CodecError::Malformed {
        command: "v2 message type".into(),
        message: message.into(),
    };
    match contents.split_first() {
        None => Err(malformed("empty contents")),
        Some((0, rest)) if rest.len() >= 12 => {
            let (command, payload) = rest.split_at(12);
            let end = command.iter().position(|&b| b == 0).unwrap_or(12);
            // As v1: the name is printable ASCII, padded with zeros.
            if !command[..end].iter().all(|b| b.is_ascii_graphic())
                || command[end..].iter().any(|&b| b != 0)
            {
                return Err(malformed("bad command name"));
            }
            Ok((
                String::from_utf8_lossy(&command[..end]).into_owned(),
                payload,
            ))
        }
        Some((0, _)) => Err(malformed("long message type cut short")),
        Some((&id, payload)) => match SHORT_IDS.get(usize::from(id)) {
            Some(command) => Ok(((*command).to_string(), payload)),
            // Core ignores message types it does not know; cairn answers none of them either.
            None => Ok((format!("unknown-{id}"), payload)),
        },
    }
}

/// A message's contents for a packet: the short type when BIP324 has one, else 0 and the
/// 12-byte command; then the payload.
pub fn contents(command: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(13 + payload.len());
    match SHORT_IDS.iter().skip(1).position(|c| *c == command) {
        Some(i) => out.push(i as u8 + 1),
        None => {
            out.push(0);
            let mut name = [0u8; 12];
            let len = command.len().min(12);
            name[..len].copy_from_slice(&command.as_bytes()[..len]);
            out.extend_from_slice(&name);
        }
    }
    out.extend_from_slice(payload);
    out
}

/// Encrypts `contents` as one genuine packet and writes it.
pub async fn write_packet<W: AsyncWrite + Unpin>(
    writer: &mut W,
    cipher: &mut OutboundCipher,
    contents: &[u8],
) -> Result<(), CodecError> {
    let mut packet = vec![0u8; OutboundCipher::encryption_buffer_len(contents.len())];
    cipher
        .encrypt(contents, &mut packet, PacketType::Genuine, None)
        .map_err(|e| CodecError::Io(std::io::Error::other(e.to_string())))?;
    writer.write_all(&packet).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_types_round_trip_short_and_long() {
        for command in ["block", "ping", "addrv2", "tx", "getcfcheckpt"] {
            let c = contents(command, b"xyz");
            assert_eq!(c.len(), 4, "{command} has a short id");
            assert_eq!(
                split_contents(&c).unwrap(),
                (command.to_string(), &b"xyz"[..])
            );
        }
        for command in [
            "version",
            "verack",
            "sendheaders",
            "wtxidrelay",
            "sendaddrv2",
            "getaddr",
        ] {
            let c = contents(command, b"");
            assert_eq!(c.len(), 13, "{command} is sent long");
            assert_eq!(split_contents(&c).unwrap(), (command.to_string(), &b""[..]));
        }
    }

    #[test]
    fn bad_message_types_are_refused() {
        assert!(split_contents(&[]).is_err());
        assert!(split_contents(&[0, b'p', b'i']).is_err(), "cut short");
        let mut bad = vec![0u8];
        bad.extend_from_slice(b"ping\0x\0\0\0\0\0\0");
        assert!(split_contents(&bad).is_err(), "bytes after the padding");
        assert_eq!(split_contents(&[200, 1]).unwrap().0, "unknown-200");
    }

    #[test]
    fn a_v1_version_is_recognised_by_its_first_16_bytes() {
        let mut first = [0u8; 16];
        first[..4].copy_from_slice(&Magic::REGTEST.to_bytes());
        first[4..11].copy_from_slice(b"version");
        assert!(is_v1_version(&first, Magic::REGTEST));
        assert!(!is_v1_version(&first, Magic::BITCOIN));
        first[4] = b'V';
        assert!(!is_v1_version(&first, Magic::REGTEST));
    }

    #[tokio::test]
    async fn garbage_past_bip324s_limit_ends_the_handshake() {
        let (a, b) = tokio::io::duplex(1 << 16);
        let (mut br, mut bw) = tokio::io::split(b);
        let (_ar, mut aw) = tokio::io::split(a);
        // A key (any 64 bytes decode as ElligatorSwift), then garbage with no terminator.
        let peer = async move {
            aw.write_all(&[7u8; KEY_BYTES]).await.unwrap();
            let _ = aw
                .write_all(&[0u8; MAX_GARBAGE + TERMINATOR_BYTES + 100])
                .await;
            aw
        };
        let (ours, _aw) = tokio::join!(
            handshake(Magic::REGTEST, Role::Responder, &mut br, &mut bw),
            peer
        );
        assert!(
            matches!(ours, Err(CodecError::Transport(_))),
            "{:?}",
            ours.err()
        );
    }

    #[tokio::test]
    async fn a_handshake_packet_over_64_kib_is_refused_before_it_is_read() {
        let (a, b) = tokio::io::duplex(1 << 20);
        let (ar, mut aw) = tokio::io::split(a);
        let (mut br, mut bw) = tokio::io::split(b);
        // The crate's own initiator, sending one decoy of 70,000 bytes before its version.
        let theirs = bip324::futures::handshake(
            Magic::REGTEST.to_bytes(),
            Role::Initiator,
            None,
            Some(vec![vec![0u8; 70_000]]),
            ar,
            &mut aw,
        );
        let ours = handshake(Magic::REGTEST, Role::Responder, &mut br, &mut bw);
        let (ours, _) = tokio::join!(ours, async {
            tokio::time::timeout(std::time::Duration::from_secs(5), theirs).await
        });
        assert!(
            matches!(ours, Err(CodecError::Oversized { .. })),
            "{:?}",
            ours.err()
        );
    }

    #[tokio::test]
    async fn the_crates_own_initiator_and_cairn_agree() {
        let (a, b) = tokio::io::duplex(1 << 16);
        let (ar, mut aw) = tokio::io::split(a);
        let (mut br, mut bw) = tokio::io::split(b);
        // Garbage and a decoy from the other end: skipped.
        let theirs = bip324::futures::handshake(
            Magic::REGTEST.to_bytes(),
            Role::Initiator,
            Some(vec![1, 2, 3]),
            Some(vec![vec![9u8; 100]]),
            ar,
            &mut aw,
        );
        let (ours, theirs) = tokio::join!(
            handshake(Magic::REGTEST, Role::Responder, &mut br, &mut bw),
            theirs
        );
        let (mut ours, (_inbound, mut outbound, _reader)) = (ours.unwrap(), theirs.unwrap());
        let packet = outbound.encrypt_to_vec(
            &contents("pong", &9u64.to_le_bytes()),
            PacketType::Genuine,
            None,
        );
        aw.write_all(&packet).await.unwrap();
        let len = read_packet_len(&mut br, &mut ours.inbound).await.unwrap();
        let got = read_packet_body(&mut br, &mut ours.inbound, len)
            .await
            .unwrap();
        assert_eq!(got, Some(("pong".to_string(), 9u64.to_le_bytes().to_vec())));
    }

    #[tokio::test]
    async fn two_ends_agree_and_exchange_packets() {
        let (a, b) = tokio::io::duplex(1 << 16);
        let (mut ar, mut aw) = tokio::io::split(a);
        let (mut br, mut bw) = tokio::io::split(b);
        let (initiator, responder) = tokio::join!(
            handshake(Magic::REGTEST, Role::Initiator, &mut ar, &mut aw),
            handshake(Magic::REGTEST, Role::Responder, &mut br, &mut bw),
        );
        let (mut i, mut r) = (initiator.unwrap(), responder.unwrap());
        write_packet(
            &mut aw,
            &mut i.outbound,
            &contents("ping", &7u64.to_le_bytes()),
        )
        .await
        .unwrap();
        let len = read_packet_len(&mut br, &mut r.inbound).await.unwrap();
        let got = read_packet_body(&mut br, &mut r.inbound, len)
            .await
            .unwrap();
        assert_eq!(got, Some(("ping".to_string(), 7u64.to_le_bytes().to_vec())));
        // A packet changed on the way does not authenticate: the connection ends, without a ban.
        let mut packet = vec![0u8; OutboundCipher::encryption_buffer_len(13)];
        i.outbound
            .encrypt(
                &contents("verack", &[]),
                &mut packet,
                PacketType::Genuine,
                None,
            )
            .unwrap();
        let last = packet.len() - 1;
        packet[last] ^= 1;
        aw.write_all(&packet).await.unwrap();
        let len = read_packet_len(&mut br, &mut r.inbound).await.unwrap();
        assert!(matches!(
            read_packet_body(&mut br, &mut r.inbound, len).await,
            Err(CodecError::Transport(_))
        ));
        // A ping of 2,000 bytes is over its command's limit.
        write_packet(&mut bw, &mut r.outbound, &contents("ping", &[0; 2000]))
            .await
            .unwrap();
        let len = read_packet_len(&mut ar, &mut i.inbound).await.unwrap();
        assert!(matches!(
            read_packet_body(&mut ar, &mut i.inbound, len).await,
            Err(CodecError::Oversized { .. })
        ));
    }
}
