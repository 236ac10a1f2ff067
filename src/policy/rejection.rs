//! Why the mempool refuses a transaction, in Bitcoin Core's words where Core has them.

use bitcoin::{OutPoint, Txid};

/// Why a transaction was refused; the text is Core's reason where Core has one.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum Rejection {
    /// The bytes are not a transaction.
    #[error("TX decode failed: {0}")]
    Decode(String),
    /// Breaks a consensus rule of Core's `CheckTransaction` or `CheckTxInputs`; `reason` is
    /// Core's reject reason.
    #[error("{reason}: {detail}")]
    Invalid {
        /// Core's reject reason, e.g. `bad-txns-inputs-duplicate`.
        reason: &'static str,
        /// Which input, output or amount.
        detail: String,
    },
    /// Already in the mempool.
    #[error("txn-already-in-mempool")]
    AlreadyInMempool,
    /// A transaction of the same txid but another witness is in the mempool.
    #[error("txn-same-nonwitness-data-in-mempool")]
    SameNonWitnessData,
    /// Already in the chain.
    #[error("txn-already-known")]
    AlreadyKnown,
    /// A coinbase outside a block.
    #[error("coinbase")]
    Coinbase,
    /// Its lock time has not passed at the next block (Core's `CheckFinalTxAtTip`).
    #[error("non-final")]
    NonFinal,
    /// An input's relative lock time has not passed at the next block (BIP68, Core's
    /// `CheckSequenceLocksAtTip`).
    #[error("non-BIP68-final")]
    NonBip68Final,
    /// An input spends nothing that exists unspent.
    #[error("bad-txns-inputs-missingorspent: input {0} spends an output that does not exist or is spent")]
    MissingInputs(OutPoint),
    /// An input spends a coinbase output that is not mature.
    #[error("bad-txns-premature-spend-of-coinbase: {0}")]
    ImmatureCoinbase(OutPoint),
    /// Outputs worth more than the inputs.
    #[error("bad-txns-in-belowout: inputs {inputs} < outputs {outputs}")]
    InBelowOut {
        /// Sum of inputs.
        inputs: u64,
        /// Sum of outputs.
        outputs: u64,
    },
    /// A script failed.
    #[error("mandatory-script-verify-flag-failed (input {input}: {message})")]
    Script {
        /// The failing input.
        input: usize,
        /// The kernel's message.
        message: String,
    },
    /// An input passes consensus but breaks a standard script flag (Core's
    /// `PolicyScriptChecks`; the message is Core's `ScriptErrorString`).
    #[error("mempool-script-verify-flag-failed ({message}), input {input}")]
    PolicyScript {
        /// The failing input.
        input: usize,
        /// Which flag, in Core's words.
        message: String,
    },
    /// Leaves a dust output of a mempool parent unspent (Core's `CheckEphemeralSpends`).
    #[error("missing-ephemeral-spends, tx {txid} did not spend parent's ephemeral dust")]
    MissingEphemeralSpends {
        /// The transaction that leaves it.
        txid: Txid,
    },
    /// Would make a cluster of more than 64 transactions or 101,000 vbytes (Core 31).
    #[error("too-large-cluster")]
    TooLargeCluster,
    /// Over the chain limits on unconfirmed ancestors and descendants; the text is Core's.
    #[error("too-long-mempool-chain, {0}")]
    TooLongChain(String),
    /// Breaks a TRUC (version 3) rule: the reference Knots's reason (`truc-…`), Core's message.
    #[error("{reason}, {message}")]
    Truc {
        /// Which rule, in Knots's words (Core says `TRUC-violation` for all).
        reason: &'static str,
        /// Core's message, naming the transactions.
        message: String,
    },
    /// A standardness rule.
    #[error("{0}")]
    NonStandard(String),
    /// A package's transactions below the relay fee are not paid for by the package.
    #[error("package fee rate too low: the package's fee {fees} < {needed} for its size")]
    PackageFee {
        /// Fees of the transactions that needed the package.
        fees: u64,
        /// The fee their size needs.
        needed: u64,
    },
    /// Refused with a package whose other member (named) was refused.
    #[error("package not accepted: its member {0} was refused")]
    PackageFailed(Txid),
    /// A parent and child replacing mempool transactions together broke a rule of Core 31's
    /// package replacement (`PackageRBFChecks`).
    #[error("package RBF failed: {0}")]
    PackageReplacement(String),
    /// The package is not a child with its parents.
    #[error("package-not-child-with-parents: {0}")]
    PackageShape(String),
    /// The fee is under the mempool's rolling minimum fee after evictions (Core's
    /// `GetMinFee`).
    #[error("mempool min fee not met, {fee} < {needed}")]
    MempoolMinFee {
        /// The fee paid.
        fee: u64,
        /// The fee needed.
        needed: u64,
    },
    /// The fee is under the minimum relay fee.
    #[error("min relay fee not met, {fee} < {needed}")]
    MinRelayFee {
        /// The fee paid.
        fee: u64,
        /// The fee needed.
        needed: u64,
    },
    /// Spends an output another mempool transaction spends, without paying enough to replace it.
    #[error("insufficient fee, rejecting replacement {txid}: {reason}")]
    Replacement {
        /// The new transaction.
        txid: Txid,
        /// Which replacement rule failed.
        reason: String,
    },
    /// A replacement whose direct conflicts lie in more than 100 clusters (Core 31's rule 5).
    #[error("too many potential replacements, rejecting replacement {txid}; too many conflicting clusters")]
    TooManyReplacements {
        /// The new transaction.
        txid: Txid,
    },
    /// A replacement that would not improve the fee-rate diagram of the clusters it changes
    /// (Core 31's `ImprovesFeerateDiagram`).
    #[error("replacement-failed, {txid}: insufficient feerate: does not improve feerate diagram")]
    ReplacementFailed {
        /// The new transaction.
        txid: Txid,
    },
    /// A replacement that spends an unconfirmed output of a transaction none of those it
    /// replaces spends from (BIP125 rule 2).
    #[error(
        "replacement-adds-unconfirmed: replacement {txid} spends new unconfirmed output {input}"
    )]
    AddsUnconfirmed {
        /// The new transaction.
        txid: Txid,
        /// The input that spends a new unconfirmed output.
        input: OutPoint,
    },
    /// A replacement spending an output of a transaction it replaces (Core's
    /// `EntriesAndTxidsDisjoint`).
    #[error("bad-txns-spends-conflicting-tx: {txid} spends conflicting transaction {conflict}")]
    SpendsConflicting {
        /// The new transaction.
        txid: Txid,
        /// The replaced transaction it spends from.
        conflict: Txid,
    },
    /// Spends what a mempool transaction spends where no replacement is allowed (a package
    /// tried by `testmempoolaccept`: Core's `m_allow_replacement` off).
    #[error("bip125-replacement-disallowed")]
    ReplacementDisallowed,
    /// Pays more than a dry run's fee-rate guard (bitcoind's `testmempoolaccept` default
    /// `maxfeerate`, 0.10 BTC/kvB): not a mempool rule, a guard against a mistyped fee.
    #[error("max-fee-exceeded: fee {fee} over {max} for its size")]
    MaxFeeExceeded {
        /// The fee paid.
        fee: u64,
        /// The most the guard allows for its size.
        max: u64,
    },
    /// The mempool is full of transactions paying more.
    #[error("mempool full")]
    MempoolFull,
    /// The index cannot answer.
    #[error("cannot check inputs: {0}")]
    Backend(String),
}

impl From<crate::kernel::scripts::ScriptFailure> for Rejection {
    fn from(failure: crate::kernel::scripts::ScriptFailure) -> Self {
        use crate::kernel::scripts::ScriptFailure;
        match failure {
            ScriptFailure::Decode(message) => Rejection::Decode(message),
            ScriptFailure::Input { input, message, .. } => Rejection::Script { input, message },
        }
    }
}
