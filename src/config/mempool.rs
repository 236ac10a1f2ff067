//! The mempool's settings: a policy profile (Bitcoin Core 31's by default, Knots 29.4's on
//! request) and the knobs that change single rules on top of either.

use super::error::ConfigError;
use super::options::FileConfig;

/// Whose relay policy the mempool follows (`mempool_policy`): every knob's default comes from
/// it, and so do the rules no knob names (the chain limits, the order outputs are judged in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PolicyProfile {
    /// Bitcoin Core 31's defaults (policy/policy.h): 0.1 sat/vB, a 100,000-byte data carrier
    /// over any number of OP_RETURN outputs, bare multisig and P2PK relayed, TRUC enforced,
    /// clusters of at most 64 transactions and 101 kvB.
    #[default]
    Core,
    /// Bitcoin Knots 29.4's defaults: 1 sat/vB, one OP_RETURN output of 83 bytes beside a
    /// payment, no bare multisig or P2PK, Knots's rules against data (BIP-110's limits among
    /// them), version 3 taken as any other, 25 ancestors and 25 descendants with the carve-out.
    Knots,
}

impl PolicyProfile {
    /// The name `mempool_policy` takes.
    pub fn name(self) -> &'static str {
        match self {
            PolicyProfile::Core => "core",
            PolicyProfile::Knots => "knots",
        }
    }
}

impl std::str::FromStr for PolicyProfile {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "core" => Ok(PolicyProfile::Core),
            "knots" => Ok(PolicyProfile::Knots),
            other => Err(format!("{other:?} is not core or knots")),
        }
    }
}

/// What the mempool does with version 3 transactions, which ask for the TRUC rules (BIP431):
/// Core always enforces them; Knots's `-mempooltruc` also accepts them as any other version
/// (its default) or rejects them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrucPolicy {
    /// Taken as any other version (Knots's default): no TRUC rule, the CPFP carve-out allowed.
    Accept,
    /// The TRUC rules enforced (Core's behaviour).
    Enforce,
    /// Refused as non-standard (`version`).
    Reject,
}

impl std::str::FromStr for TrucPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "accept" => Ok(TrucPolicy::Accept),
            "enforce" => Ok(TrucPolicy::Enforce),
            "reject" => Ok(TrucPolicy::Reject),
            other => Err(format!("{other:?} is not accept, enforce or reject")),
        }
    }
}

/// Mempool settings.
#[derive(Debug, Clone, Copy)]
pub struct MempoolConfig {
    /// Whose policy the rules no knob names follow.
    pub profile: PolicyProfile,
    /// Most memory the pool may take, counted as Core counts it against `-maxmempool`
    /// ([`crate::mempool::memory`]); the worst is evicted above it.
    pub max_bytes: u64,
    /// Whether it is saved on shutdown and loaded on start (Core's `-persistmempool`).
    pub persist: bool,
    /// Whether bare multisig outputs are standard (`-permitbaremultisig`: true in Core, false
    /// in Knots).
    pub permit_bare_multisig: bool,
    /// Whether a transaction with OP_RETURN outputs and no other is standard (Knots's
    /// `-permitbaredatacarrier`, false by default; Core has no such rule).
    pub permit_bare_datacarrier: bool,
    /// Whether bare pubkey (P2PK) outputs are standard (Knots's `-permitbarepubkey`, false by
    /// default; Core relays them).
    pub permit_bare_pubkey: bool,
    /// What becomes of version 3 (TRUC) transactions.
    pub truc: TrucPolicy,
    /// The minimum relay fee rate and the incremental relay fee rate, sat per 1,000 vbytes
    /// (`-minrelaytxfee` and `-incrementalrelayfee`: 100 in Core 30 and 31, 1,000 in Knots).
    pub min_relay_per_kvb: u64,
    /// Most bytes of OP_RETURN output scripts (`-datacarriersize`: 100,000 in Core 30 and 31,
    /// for all of them together; 83 in Knots, for each).
    pub datacarrier_size: usize,
    /// Whether a transaction may have more than one OP_RETURN output (Core 30 and 31; not
    /// Knots).
    pub permit_multiple_datacarrier: bool,
    /// Whether Knots's rules against data apply ([`crate::mempool`]'s `data_rules`: parasites,
    /// Runes, `-maxscriptsize`, data in input scripts, BIP-110's limits): Knots's defaults;
    /// Core has none of them.
    pub knots_data_rules: bool,
}

impl MempoolConfig {
    /// The defaults of `profile`.
    pub fn for_profile(profile: PolicyProfile) -> Self {
        let core = profile == PolicyProfile::Core;
        MempoolConfig {
            profile,
            max_bytes: 300_000_000,
            persist: true,
            permit_bare_multisig: core,
            permit_bare_datacarrier: core,
            permit_bare_pubkey: core,
            truc: if core {
                TrucPolicy::Enforce
            } else {
                TrucPolicy::Accept
            },
            min_relay_per_kvb: if core { 100 } else { 1_000 },
            datacarrier_size: if core { MAX_DATACARRIER_SIZE } else { 83 },
            permit_multiple_datacarrier: core,
            knots_data_rules: !core,
        }
    }

    /// Knots 29.4's defaults (`mempool_policy = "knots"`).
    pub fn knots() -> Self {
        MempoolConfig::for_profile(PolicyProfile::Knots)
    }

    /// Whether the chain limits are Core 31's clusters (else Knots's ancestors and
    /// descendants with the CPFP carve-out).
    pub fn clusters(&self) -> bool {
        self.profile == PolicyProfile::Core
    }
}

impl Default for MempoolConfig {
    /// Bitcoin Core 31's defaults.
    fn default() -> Self {
        MempoolConfig::for_profile(PolicyProfile::Core)
    }
}

/// The largest `datacarrier_size`: a standard transaction's size (Core's `MAX_OP_RETURN_RELAY`,
/// `MAX_STANDARD_TX_WEIGHT / WITNESS_SCALE_FACTOR`), Core 30's and 31's default.
pub const MAX_DATACARRIER_SIZE: usize = 100_000;

/// The mempool settings of `o`: the profile's defaults, each knob given overriding its own.
pub(super) fn resolve(o: &FileConfig, max_bytes: u64) -> Result<MempoolConfig, ConfigError> {
    let profile = parsed("mempool_policy", o.mempool_policy.as_deref())?.unwrap_or_default();
    let d = MempoolConfig::for_profile(profile);
    Ok(MempoolConfig {
        profile,
        max_bytes,
        persist: o.persist_mempool.unwrap_or(d.persist),
        permit_bare_multisig: o.permit_bare_multisig.unwrap_or(d.permit_bare_multisig),
        permit_bare_datacarrier: o
            .permit_bare_datacarrier
            .unwrap_or(d.permit_bare_datacarrier),
        permit_bare_pubkey: o.permit_bare_pubkey.unwrap_or(d.permit_bare_pubkey),
        truc: parsed("mempool_truc", o.mempool_truc.as_deref())?.unwrap_or(d.truc),
        min_relay_per_kvb: min_relay_per_kvb(o.mempool_min_relay_fee)?
            .unwrap_or(d.min_relay_per_kvb),
        datacarrier_size: datacarrier_size(o.datacarrier_size)?.unwrap_or(d.datacarrier_size),
        permit_multiple_datacarrier: o
            .permit_multiple_datacarrier
            .unwrap_or(d.permit_multiple_datacarrier),
        knots_data_rules: o.knots_data_rules.unwrap_or(d.knots_data_rules),
    })
}

/// A named option's value parsed, if given.
fn parsed<T: std::str::FromStr<Err = String>>(
    option: &'static str,
    given: Option<&str>,
) -> Result<Option<T>, ConfigError> {
    given
        .map(str::parse)
        .transpose()
        .map_err(|message| ConfigError::Invalid { option, message })
}

/// `mempool_min_relay_fee` (sat/vB, 0.001 to 1,000) in sat per 1,000 vbytes, if given.
fn min_relay_per_kvb(given: Option<f64>) -> Result<Option<u64>, ConfigError> {
    let Some(sat_per_vb) = given else {
        return Ok(None);
    };
    if !(0.001..=1_000.0).contains(&sat_per_vb) {
        return Err(ConfigError::Invalid {
            option: "mempool_min_relay_fee",
            message: format!("{sat_per_vb} sat/vB is outside 0.001..=1000"),
        });
    }
    Ok(Some((sat_per_vb * 1000.0).round() as u64))
}

/// `datacarrier_size`, if given: at most 100,000 (a standard transaction's size).
fn datacarrier_size(given: Option<usize>) -> Result<Option<usize>, ConfigError> {
    match given {
        Some(size) if size > MAX_DATACARRIER_SIZE => Err(ConfigError::Invalid {
            option: "datacarrier_size",
            message: format!("{size} bytes is over {MAX_DATACARRIER_SIZE}"),
        }),
        given => Ok(given),
    }
}
