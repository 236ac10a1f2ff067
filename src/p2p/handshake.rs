//! The version handshake: version, verack and the feature messages that come with them
//! (wtxidrelay, sendaddrv2, sendheaders).

use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use bitcoin::p2p::address::Address;
use bitcoin::p2p::message::NetworkMessage;
use bitcoin::p2p::message_network::VersionMessage;
use bitcoin::p2p::{Magic, ServiceFlags};

use super::addrbook::follows_other_chain;
use super::codec::Incoming;
use super::context::PeerContext;
use super::error::PeerError;
use super::wire::{ReadWire, WriteWire};

/// The protocol version cairn speaks (wtxidrelay, sendheaders).
pub const PROTOCOL_VERSION: u32 = 70016;

/// What the handshake learnt about the peer.
#[derive(Debug, Clone)]
pub struct PeerTraits {
    /// It announces transactions by wtxid (BIP339).
    pub wtxid_relay: bool,
    /// It takes `addrv2` (BIP155).
    pub addrv2: bool,
    /// The services it advertised.
    pub services: ServiceFlags,
    /// Its user agent, Core-sanitized (`cleanSubVer`: safe characters, at most 256).
    pub user_agent: String,
    /// The height it said it had in its `version` message.
    pub start_height: i64,
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Writes one message and flushes it (the handshake runs before the writer task exists).
async fn send(writer: &mut WriteWire, msg: NetworkMessage) -> Result<(), PeerError> {
    Ok(writer.send_now(msg).await?)
}

/// Sends our version and reads the peer's, with the feature messages and veracks around them;
/// refuses old versions, a connection to ourselves, and messages out of order.
pub async fn handshake(
    reader: &mut ReadWire,
    writer: &mut WriteWire,
    addr: SocketAddr,
    ctx: &PeerContext,
) -> Result<PeerTraits, PeerError> {
    let mut version = VersionMessage::new(
        ctx.services,
        now_secs(),
        Address::new(&addr, ServiceFlags::NONE),
        Address::new(&SocketAddr::from(([0, 0, 0, 0], 0)), ctx.services),
        rand_nonce(),
        format!("/cairn:{}/", env!("CARGO_PKG_VERSION")),
        tokio::task::block_in_place(|| ctx.validator.tip().height) as i32,
    );
    version.version = PROTOCOL_VERSION;
    version.relay = ctx.mempool.is_some();
    let our_nonce = version.nonce;
    ctx.registry.remember_nonce(our_nonce);
    let sent = send(writer, NetworkMessage::Version(version)).await;
    let result = async {
        sent?;
        handshake_replies(reader, writer, ctx).await
    }
    .await;
    ctx.registry.forget_nonce(our_nonce);
    result
}

async fn handshake_replies(
    reader: &mut ReadWire,
    writer: &mut WriteWire,
    ctx: &PeerContext,
) -> Result<PeerTraits, PeerError> {
    let mut got_version = false;
    let mut got_verack = false;
    let mut traits = PeerTraits {
        wtxid_relay: false,
        addrv2: false,
        services: ServiceFlags::NONE,
        user_agent: String::new(),
        start_height: 0,
    };
    while !(got_version && got_verack) {
        match reader.read_message().await? {
            Incoming::Message(NetworkMessage::Version(v)) => {
                if got_version {
                    return Err(PeerError::Misbehaving("second version message".into()));
                }
                if v.version < 70012 {
                    return Err(PeerError::Handshake(format!(
                        "protocol version {} too old",
                        v.version
                    )));
                }
                // Knots's fork left mainnet only; on the test networks Knots announces the
                // bit on Bitcoin's chain.
                if ctx.magic == Magic::BITCOIN && follows_other_chain(v.services) {
                    return Err(PeerError::OtherChain {
                        services: v.services.to_u64(),
                    });
                }
                if ctx.registry.is_own_nonce(v.nonce) {
                    return Err(PeerError::Handshake("connected to ourselves".into()));
                }
                got_version = true;
                traits.services = v.services;
                traits.start_height = i64::from(v.start_height);
                // Core's `cleanSubVer`: what is logged and shown keeps safe characters only.
                traits.user_agent = crate::listen::sanitized(&v.user_agent);
                if v.version >= 70016 {
                    send(writer, NetworkMessage::WtxidRelay).await?;
                }
                send(writer, NetworkMessage::SendAddrV2).await?;
                send(writer, NetworkMessage::Verack).await?;
            }
            Incoming::Message(NetworkMessage::Verack) => got_verack = true,
            Incoming::Message(NetworkMessage::WtxidRelay) => traits.wtxid_relay = true,
            Incoming::Message(NetworkMessage::SendAddrV2) => traits.addrv2 = true,
            Incoming::Message(other) if !got_version => {
                return Err(PeerError::Misbehaving(format!(
                    "{} before version",
                    other.cmd()
                )));
            }
            _ => {}
        }
    }
    send(writer, NetworkMessage::SendHeaders).await?;
    Ok(traits)
}

fn rand_nonce() -> u64 {
    use rand::RngCore;
    rand::rngs::OsRng.next_u64()
}
