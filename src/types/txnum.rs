//! A transaction's number in the chain.

/// Bytes of a [`TxNum`] in keys: 2^40 transactions is about a thousand times mainnet's count.
pub const TXNUM_LEN: usize = 5;

/// The global number of a transaction: its position in the chain, counting from genesis's
/// coinbase as 0. Keys store it big-endian so rows sort in chain order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TxNum(pub u64);

impl TxNum {
    /// The key encoding: 5 bytes, big-endian.
    pub fn encode(self) -> [u8; TXNUM_LEN] {
        let b = self.0.to_be_bytes();
        let mut out = [0u8; TXNUM_LEN];
        out.copy_from_slice(&b[8 - TXNUM_LEN..]);
        out
    }

    /// Decodes 5 big-endian bytes.
    pub fn decode(bytes: &[u8]) -> Option<TxNum> {
        if bytes.len() != TXNUM_LEN {
            return None;
        }
        let mut b = [0u8; 8];
        b[8 - TXNUM_LEN..].copy_from_slice(bytes);
        Some(TxNum(u64::from_be_bytes(b)))
    }
}
