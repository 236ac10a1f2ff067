//! The read model every server answers from: one [`ReadModel`] per node (the index, the
//! mempool, the kernel's block and undo reads, and the caches), and per request one
//! [`ChainView`] taken at once, which answers each domain question once (a script's history,
//! status, balance and unspent outputs; an outpoint's status and spender; a transaction with its
//! place, prevouts and proofs; headers and checkpoint proofs; block filters and their headers; silent-payment tweaks) and reports what it read.
//!
//! The servers (`electrum`, `http`) only parse requests and render these answers; they never
//! join the index and the mempool themselves. The view never writes the index.

mod cache;
mod filters;
pub mod merkle;
mod model;
mod outpoint;
mod script;
pub mod status;
mod tweaks;
mod tx;

pub use crate::index::query::Cost;
pub use cache::{Cached, TipCache};
pub use filters::{BlockFilter, FilterState};
pub use model::{CacheSettings, ChainView, CostMeter, ReadModel, ViewError};
pub use outpoint::{OutpointStatus, Spender};
pub use script::{Balance, ScriptStats, Unspent};
pub use tweaks::{TweakState, TxTweak};
pub use tx::{decode, fee_paid, BlockOfTx, Confirmation, FoundTx, TxAtPosition, WitnessProof};
