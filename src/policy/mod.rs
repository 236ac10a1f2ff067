//! Bitcoin's relay policy as pure functions of a transaction, the outputs it spends and the
//! profile ([`crate::config::MempoolConfig`]): Core's consensus checks a mempool runs before the
//! kernel's (`consensus`), standardness of the transaction (`standard`) and of what it spends
//! (`inputs`), the policy script interpreter under Core's standard flags (`interpreter`),
//! Knots's rules against data (`data_rules`, `dead_parts`), the output kinds Core's `Solver`
//! tells apart (`solver`), package shapes (`packages`), and why a transaction is refused
//! (`Rejection`). The pool itself (relatives, clusters, replacement, eviction) is
//! [`crate::mempool`]'s.

pub mod consensus;
pub mod data_rules;
pub mod dead_parts;
pub mod inputs;
pub mod interpreter;
pub mod packages;
mod pushes;
mod rejection;
pub mod solver;
pub mod standard;
#[cfg(test)]
mod tests;

pub use packages::{check_package_shape, check_well_formed, MAX_PACKAGE_COUNT};
pub use rejection::Rejection;
pub use standard::MIN_RELAY_PER_KVB;
