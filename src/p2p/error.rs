//! Why a peer connection ended, and whether that deserves a ban.

use super::codec::CodecError;

/// Why a peer was disconnected.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// Its bytes were refused.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The handshake failed.
    #[error("handshake: {0}")]
    Handshake(String),
    /// It broke the protocol.
    #[error("misbehaving: {0}")]
    Misbehaving(String),
    /// It asked for something Bitcoin Core answers with a disconnect but not a ban (an
    /// oversized locator).
    #[error("disconnected: {0}")]
    Refused(String),
    /// It went silent, or took too long over the handshake.
    #[error("timed out")]
    Timeout,
    /// It stopped reading what cairn sends it (Core's send timeout): a disconnect, no ban.
    #[error("not reading: {0}")]
    NotReading(String),
    /// The connection closed: reading from it ended.
    #[error("connection closed")]
    Closed,
    /// Writing to it failed, so its writer task ended.
    #[error("write failed")]
    WriterGone,
    /// cairn could not answer (its store failed).
    #[error("internal error: {0}")]
    Internal(String),
    /// It announced another chain's service bit (Knots's BLAKE2b fork): not misbehaviour, and
    /// not a peer to dial again.
    #[error("follows another chain (services {services:#x}: Knots's BLAKE2b fork)")]
    OtherChain {
        /// The services it announced.
        services: u64,
    },
    /// It closed the connection on cairn's BIP324 handshake: it speaks v1 only.
    #[error("no v2 transport (BIP324): the peer closed the connection on its handshake")]
    NoV2,
}

impl PeerError {
    /// Whether the peer broke the protocol on purpose or by a bug, rather than speaking another
    /// transport (a BIP324 v2 handshake looks like a wrong magic: the peer then retries with v1)
    /// or going away.
    pub fn deserves_ban(&self) -> bool {
        match self {
            PeerError::Misbehaving(_) => true,
            PeerError::Codec(c) => {
                matches!(
                    c,
                    CodecError::Oversized { .. } | CodecError::Malformed { .. }
                )
            }
            PeerError::Handshake(_)
            | PeerError::Refused(_)
            | PeerError::Timeout
            | PeerError::NotReading(_)
            | PeerError::Closed
            | PeerError::WriterGone
            | PeerError::NoV2
            | PeerError::OtherChain { .. }
            | PeerError::Internal(_) => false,
        }
    }
}
