//! The domain's plain types, at the bottom of the house: every module may use them, and they
//! use nothing of cairn's.

mod abandon;
mod coin;
mod history;
mod inline;
mod network;
mod protocol_version;
mod scripthash;
mod subnet;
mod txnum;

pub use abandon::{abandoned, run_marked, Abandon};
pub use coin::Coin;
pub use history::{Height, HistoryEntry};
pub use inline::{inline, inline_refused, inline_rows, may_block, refuse_inline, try_inline};
pub use network::{signet_magic, Network, UnknownNetwork};
pub use protocol_version::ProtocolVersion;
pub use scripthash::ScriptHash;
pub use subnet::{BadSubnet, Subnet};
pub use txnum::{TxNum, TXNUM_LEN};
