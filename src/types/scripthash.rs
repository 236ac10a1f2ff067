//! Electrum's name for an output script.

use bitcoin::hashes::{sha256, Hash};
use bitcoin::hex::{DisplayHex, FromHex};
use bitcoin::Script;

/// An Electrum script hash: SHA-256 of the output script. Shown to clients as the hex of the
/// bytes reversed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScriptHash(pub [u8; 32]);

impl ScriptHash {
    /// The script hash of an output script.
    pub fn of(script: &Script) -> Self {
        ScriptHash(sha256::Hash::hash(script.as_bytes()).to_byte_array())
    }

    /// Parses the Electrum form (hex, reversed byte order).
    pub fn from_electrum_hex(text: &str) -> Option<Self> {
        let mut bytes: [u8; 32] = Vec::<u8>::from_hex(text).ok()?.try_into().ok()?;
        bytes.reverse();
        Some(ScriptHash(bytes))
    }

    /// The Electrum form (hex, reversed byte order).
    pub fn to_electrum_hex(&self) -> String {
        let mut bytes = self.0;
        bytes.reverse();
        bytes.to_lower_hex_string()
    }
}
