//! What a host's requests cost, and what its cost earns it, for every query server (Electrum
//! and HTTP): ElectrumX's session cost (aiorpcX `Session.cost`, decayed by
//! `cost_decay_per_sec`), kept per host so that its connections share one account, and kept a
//! while after they end so that reconnecting does not clear it (ElectrumX's `retained_cost`);
//! ElectrumX's throttle (aiorpcX `_throttled_request`): under the soft limit a request runs at
//! once; between the soft and the hard limit it waits first, up to [`REQUEST_SLEEP`] as the cost
//! nears the hard limit; at the hard limit the client is refused. One unit is ElectrumX's:
//! [`BANDWIDTH_UNIT`] bytes sent or received (`BANDWIDTH_UNIT_COST`), [`ROWS_PER_UNIT`] index
//! rows, [`READ_BYTES_PER_UNIT`] bytes read from the store and the block files, and [`BASE`] for
//! any request.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::config::CostLimits;
use crate::view::Cost;

/// A decaying cost, in ElectrumX's units.
#[derive(Debug)]
pub struct Account(Mutex<Charged>);

/// A cost as of an instant.
#[derive(Debug, Clone, Copy)]
pub struct Charged {
    /// The cost then.
    pub units: f64,
    /// When.
    pub at: Instant,
}

impl Charged {
    /// The cost at `now`, having decayed by `decay_per_sec` since.
    fn at(self, now: Instant, decay_per_sec: f64) -> f64 {
        let secs = now.saturating_duration_since(self.at).as_secs_f64();
        (self.units - secs * decay_per_sec).max(0.0)
    }
}

impl Default for Account {
    fn default() -> Self {
        Account::from(Charged {
            units: 0.0,
            at: Instant::now(),
        })
    }
}

impl From<Charged> for Account {
    fn from(charged: Charged) -> Self {
        Account(Mutex::new(charged))
    }
}

impl Account {
    /// The cost now, decayed by `decay_per_sec` since it was last charged.
    pub fn level(&self, decay_per_sec: f64) -> f64 {
        let charged = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        charged.at(Instant::now(), decay_per_sec)
    }

    /// Adds `units` to the cost decayed to now; returns the new cost.
    pub fn charge(&self, units: f64, decay_per_sec: f64) -> f64 {
        let mut charged = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let units = charged.at(now, decay_per_sec) + units.max(0.0);
        *charged = Charged { units, at: now };
        units
    }

    /// Takes back `units` charged ahead that the work did not cost (never below nothing).
    pub fn refund(&self, units: f64, decay_per_sec: f64) {
        let mut charged = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let units = (charged.at(now, decay_per_sec) - units.max(0.0)).max(0.0);
        *charged = Charged { units, at: now };
    }

    /// The cost as last charged, to be kept when the host leaves.
    pub fn snapshot(&self) -> Charged {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a connection's requests are charged to: its host's account, and its group's (IPv4 /24,
/// IPv6 /48, or every exempt connection together), as ElectrumX charges a session its group's
/// cost besides its own (`SessionManager.extra_cost`, the /24 group weighing 1.0). The host's
/// cost is held to the limits; the group's to [`GROUP_FACTOR`] times them. Unlike ElectrumX, a
/// group's cost holds back only its costly hosts (those past the soft limit themselves), and it
/// only ever delays: a group over its limits makes each of them wait up to the longest pause
/// however little its own cost, but only a host's own cost closes it, and a quiet neighbour is
/// never held. So a subnet of abusers is slowed as one (each fresh address gets the soft
/// limit's worth, then waits), and an honest wallet behind the same NAT, or on the same Tor
/// onion service, is served as ever. Every exempt connection (where a Tor onion service's
/// clients arrive, each connection a host of its own with a fresh account) is held back by its
/// group's cost whatever its own, so reconnecting clears nothing.
#[derive(Debug, Default, Clone)]
pub struct Accounts {
    /// The host's (an exempt connection's own).
    pub host: Arc<Account>,
    /// Its group's.
    pub group: Arc<Account>,
    /// Whether it is an exempt connection's, whose own account starts afresh with each
    /// connection: its group's cost (every exempt connection's, kept for as long as the server
    /// runs) then holds it back whatever its own, as ElectrumX holds every session of a group.
    pub exempt: bool,
}

/// How many hosts' worth of cost a group may run up: as many as its connections
/// (`electrum_max_connections_per_subnet` is four times `_per_ip` by default).
pub const GROUP_FACTOR: f64 = 4.0;

impl Accounts {
    /// The host's cost now.
    pub fn level(&self, decay_per_sec: f64) -> f64 {
        self.host.level(decay_per_sec)
    }

    /// What a request may do now, by the host's cost and its group's.
    pub fn verdict(&self, limits: &CostLimits) -> Verdict {
        let decay = limits.decay_per_sec;
        let level = self.host.level(decay);
        let host = limits.verdict(level);
        if !self.exempt && (limits.soft <= 0.0 || level <= limits.soft) {
            return host;
        }
        let group = limits
            .for_group()
            .verdict(self.group.level(decay * GROUP_FACTOR));
        host.stricter(group.never_close())
    }

    /// Adds `units` to the host's cost and its group's; says what the host may do now.
    pub fn charge(&self, units: f64, limits: &CostLimits) -> Verdict {
        self.host.charge(units, limits.decay_per_sec);
        self.group
            .charge(units, limits.decay_per_sec * GROUP_FACTOR);
        self.verdict(limits)
    }

    /// Charges `units` of work before it runs (a broadcast's estimated checks): whether it may
    /// run, that is whether the host stays under the hard limit with them (an exempt
    /// connection's group under its own, since an exempt connection's account starts afresh).
    /// Refused or not, the host pays for what it asked, so a refusal takes it to the limit.
    /// Each account's check and charge is one step, so requests running at once never pass
    /// the limit together.
    pub fn pay_ahead(&self, units: f64, limits: &CostLimits) -> bool {
        let (host, group) = self.charge_both(units, limits);
        let group_full = self.exempt && group >= limits.hard * GROUP_FACTOR;
        limits.hard <= 0.0 || (host < limits.hard && !group_full)
    }

    /// [`Accounts::pay_ahead`] held to the host's own account only: its group's cost, an
    /// exempt connection's too, is left to make it wait ([`Accounts::verdict`]).
    pub fn pay_ahead_own(&self, units: f64, limits: &CostLimits) -> bool {
        let (host, _) = self.charge_both(units, limits);
        limits.hard <= 0.0 || host < limits.hard
    }

    /// Adds `units` to the host's cost and its group's: both costs now.
    fn charge_both(&self, units: f64, limits: &CostLimits) -> (f64, f64) {
        let host = self.host.charge(units, limits.decay_per_sec);
        let group = (self.group).charge(units, limits.decay_per_sec * GROUP_FACTOR);
        (host, group)
    }
}

/// Bytes of a request and its answer (or a notification) worth one unit: ElectrumX's
/// `BANDWIDTH_UNIT_COST`.
pub const BANDWIDTH_UNIT: f64 = 5_000.0;
/// Index rows (and blocks' spent outputs, transactions) read worth one unit: a history of
/// 50 entries costs about what ElectrumX charges (`len(history) / 50`).
pub const ROWS_PER_UNIT: f64 = 50.0;
/// Bytes read from the store and the block files worth one unit: a whole 2 MB block is 40.
pub const READ_BYTES_PER_UNIT: f64 = 50_000.0;
/// What any request costs besides: its parse, dispatch and round trip.
pub const BASE: f64 = 0.05;
/// What a connection costs its host as it is accepted (its handshakes, its session): a host
/// that reconnects in a loop pays for it.
pub const CONNECTION: f64 = 1.0;
/// The longest a request waits for its turn when its host's cost nears the hard limit
/// (ElectrumX's `REQUEST_SLEEP`, 2,500 ms).
pub const REQUEST_SLEEP: Duration = Duration::from_millis(2_500);

/// What a request may do, by its host's cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Run now.
    Go,
    /// Run after waiting this long.
    Wait(Duration),
    /// Refuse it: an Electrum session is closed, an HTTP request answered 429.
    Close,
}

impl Verdict {
    /// The stricter of two verdicts: closing, else the longer wait.
    fn stricter(self, other: Verdict) -> Verdict {
        match (self, other) {
            (Verdict::Close, _) | (_, Verdict::Close) => Verdict::Close,
            (Verdict::Wait(a), Verdict::Wait(b)) => Verdict::Wait(a.max(b)),
            (Verdict::Wait(a), Verdict::Go) | (Verdict::Go, Verdict::Wait(a)) => Verdict::Wait(a),
            (Verdict::Go, Verdict::Go) => Verdict::Go,
        }
    }

    /// This verdict with closing turned into the longest wait.
    fn never_close(self) -> Verdict {
        match self {
            Verdict::Close => Verdict::Wait(REQUEST_SLEEP),
            other => other,
        }
    }
}

impl CostLimits {
    /// What a request may do when its host's cost is `level`.
    pub fn verdict(&self, level: f64) -> Verdict {
        if self.hard > 0.0 && level >= self.hard {
            return Verdict::Close;
        }
        if self.soft <= 0.0 || level <= self.soft {
            return Verdict::Go;
        }
        let span = match self.hard > self.soft {
            true => self.hard - self.soft,
            false => self.soft,
        };
        let fraction = ((level - self.soft) / span).min(1.0);
        Verdict::Wait(REQUEST_SLEEP.mul_f64(fraction))
    }

    /// The limits of a group: [`GROUP_FACTOR`] times a host's, decaying as fast.
    fn for_group(&self) -> CostLimits {
        CostLimits {
            soft: self.soft * GROUP_FACTOR,
            hard: self.hard * GROUP_FACTOR,
            decay_per_sec: self.decay_per_sec * GROUP_FACTOR,
        }
    }

    /// Whole seconds until a cost of `level` has decayed below the hard limit (at least 1):
    /// what an HTTP client refused for its cost is told to wait (`Retry-After`).
    pub fn retry_after(&self, level: f64) -> u64 {
        if self.decay_per_sec <= 0.0 {
            return 1;
        }
        let secs = (level - self.hard) / self.decay_per_sec;
        (secs.ceil() as u64).saturating_add(1)
    }
}

/// The units of `requests` requests that read `read` and moved `bytes` bytes in and out.
pub fn units(requests: usize, read: Cost, bytes: usize) -> f64 {
    BASE * requests as f64
        + read.rows as f64 / ROWS_PER_UNIT
        + read.bytes as f64 / READ_BYTES_PER_UNIT
        + bytes as f64 / BANDWIDTH_UNIT
}

/// What a refused or only tried broadcast pays beyond its checks: 10 units.
const REFUSED_ROWS: u64 = 500;

/// What an answer given again from the verdicts kept ([`super::VerdictCache`]) costs, its
/// checks not run again: a refusal's 10 units, so a flood of repeats costs its sender as a
/// flood of refusals does.
pub fn repeated() -> Cost {
    Cost {
        rows: REFUSED_ROWS,
        bytes: 0,
    }
}

/// What a broadcast's checks cost, which read outside the view: a row's worth per 20 bytes
/// (its inputs looked up, its scripts verified twice: by the policy interpreter under the
/// standard flags, then by the kernel under the consensus ones, or the failing input by the
/// interpreter again; each run costs about as much: `benches/policy_scripts.rs`), a row per
/// 1,000 bytes hashed for each legacy input's signatures (each hashes the whole transaction,
/// in each run: a 100 kB transaction of 1,000 legacy inputs costs 2,000 units, not 100),
/// [`SIGNATURE_CHECK_ROWS`] for each signature check its scripts may make
/// ([`signature_checks`]: a 1-of-15 multisig input signed by the last key makes 15), and 500
/// rows more (10 units) when it is refused or only tried, so a client that sends what the
/// network refuses, or asks again and again, pays for the work; and the clusters it made the
/// mempool linearize, `linearized` ([`LINEARIZED_PER_ROW`]). Known from the transactions alone,
/// so a session charges it before the checks run (`linearized` 0), and what they cost beyond
/// after.
pub fn broadcast_checks(raws: &[&[u8]], refused: bool, linearized: u64) -> Cost {
    let decoded: Vec<bitcoin::Transaction> = raws
        .iter()
        .filter_map(|raw| bitcoin::consensus::deserialize(raw).ok())
        .collect();
    let hashed: u64 = decoded.iter().map(legacy_hashing).sum();
    let checks: u64 = decoded.iter().map(signature_checks).sum();
    let bytes: u64 = raws.iter().map(|raw| raw.len() as u64).sum();
    let rows = bytes / 20
        + hashed / 1_000
        + checks * SIGNATURE_CHECK_ROWS
        + if refused { REFUSED_ROWS } else { 0 }
        + linearized / LINEARIZED_PER_ROW;
    Cost { rows, bytes: 0 }
}

/// What one signature check costs, in rows: about 60 µs for its two runs (ECDSA or Schnorr
/// verification, some 30 µs each here), at about 12 µs a row (a 100 kB transaction's 5,000 rows
/// take some 60 ms to check).
pub const SIGNATURE_CHECK_ROWS: u64 = 5;

/// The signature checks a transaction's inputs may make, read from the transaction alone: for
/// each input the most that the script it carries may make, counted as Core's accurate count
/// (a multisig's keys, `OP_CHECKSIGADD` too): a P2SH redeem script (the last push of its
/// scriptSig, unless the scriptSig is a signature and a key), a P2WSH witness script (the last
/// witness item) or a tapscript leaf (the item before the control block, an annex aside); a key
/// spend makes one, and a scriptSig that starts with the multisig dummy and carries no script
/// (bare multisig, at most three keys to be standard) three.
pub fn signature_checks(tx: &bitcoin::Transaction) -> u64 {
    tx.input.iter().map(input_signature_checks).sum()
}

/// [`signature_checks`] of one input.
fn input_signature_checks(input: &bitcoin::TxIn) -> u64 {
    use bitcoin::script::Instruction;
    let pushes: Vec<&[u8]> = input
        .script_sig
        .instructions()
        .map_while(|i| match i {
            Ok(Instruction::PushBytes(push)) => Some(push.as_bytes()),
            _ => None,
        })
        .collect();
    let from_script_sig = match pushes.as_slice() {
        [] => 0,
        [_, key] if matches!(key.len(), 33 | 65) => 0,
        [.., redeem] => checks_in(redeem),
    };
    let bare_multisig = matches!(pushes.first(), Some(dummy) if dummy.is_empty());
    let mut items: Vec<&[u8]> = input.witness.iter().collect();
    if items.len() >= 2
        && items
            .last()
            .is_some_and(|annex| annex.first() == Some(&0x50))
    {
        items.pop();
    }
    let from_witness = match items.as_slice() {
        [] => 0,
        [signature] if matches!(signature.len(), 64 | 65) => 0,
        [_, key] if key.len() == 33 => 0,
        [.., leaf, control] if is_control_block(control) => checks_in(leaf),
        [.., script] => checks_in(script),
    };
    let floor = if bare_multisig && from_script_sig == 0 {
        3
    } else {
        1
    };
    from_script_sig.max(from_witness).max(floor) as u64
}

/// The signature checks `script` may make: Core's accurate count, and `OP_CHECKSIGADD`.
fn checks_in(script: &[u8]) -> usize {
    let script = bitcoin::Script::from_bytes(script);
    let adds = script
        .instructions()
        .filter(|i| {
            matches!(i, Ok(bitcoin::script::Instruction::Op(op))
                if *op == bitcoin::opcodes::all::OP_CHECKSIGADD)
        })
        .count();
    script.count_sigops() + adds
}

/// Whether a witness item is a taproot control block: a leaf version byte (`0xc0` or
/// `0xc1`, with the parity bit) and 32-byte hashes.
fn is_control_block(item: &[u8]) -> bool {
    item.len() >= 33 && (item.len() - 33).is_multiple_of(32) && item[0] & 0xfe == 0xc0
}

/// Linearization work ([`crate::mempool::linearize::metered`]: each cluster's size squared) that
/// costs a row: a dense 64-transaction cluster (4,096), linearized exactly, costs 10 rows, as
/// many as 200 bytes of a broadcast's checks, about what each costs in time (some 200 µs: `cargo
/// bench --profile ci --bench cluster_mempool -- linearize`). A replacement judged against 100
/// such clusters before and after costs 2,048 rows, 41 units, beyond its bytes.
const LINEARIZED_PER_ROW: u64 = 400;

/// The bytes a transaction's legacy signature checks hash at most: each non-witness input's
/// signature hash covers the whole transaction without witnesses.
fn legacy_hashing(tx: &bitcoin::Transaction) -> u64 {
    let legacy = tx.input.iter().filter(|i| i.witness.is_empty()).count() as u64;
    legacy.saturating_mul(tx.base_size() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_cost_decays_to_zero_and_never_below() {
        let ago = Instant::now() - Duration::from_secs(10);
        let account = Account::from(Charged {
            units: 100.0,
            at: ago,
        });
        let level = account.level(5.0);
        assert!((49.0..=50.0).contains(&level), "{level}");
        assert!(account.level(20.0) == 0.0);
        let after = account.charge(10.0, 5.0);
        assert!((59.0..=60.0).contains(&after), "{after}");
        assert!(
            account.charge(-5.0, 0.0) >= after,
            "nothing is ever refunded"
        );
    }

    #[test]
    fn requests_wait_more_as_the_cost_nears_the_hard_limit_then_close() {
        let limits = CostLimits::default();
        assert_eq!(limits.verdict(0.0), Verdict::Go);
        assert_eq!(limits.verdict(1_000.0), Verdict::Go);
        assert_eq!(
            limits.verdict(5_500.0),
            Verdict::Wait(REQUEST_SLEEP.mul_f64(0.5))
        );
        assert_eq!(limits.verdict(10_000.0), Verdict::Close);
        let off = CostLimits {
            soft: 0.0,
            hard: 0.0,
            decay_per_sec: 0.0,
        };
        assert_eq!(off.verdict(1e12), Verdict::Go);
    }

    #[test]
    fn a_refused_host_is_told_when_its_cost_is_below_the_hard_limit_again() {
        let limits = CostLimits::default();
        assert_eq!(limits.retry_after(10_000.0), 1);
        assert_eq!(limits.retry_after(10_095.0), 11);
        assert_eq!(limits.retry_after(9_000.0), 1, "at least a second");
        let no_decay = CostLimits {
            decay_per_sec: 0.0,
            ..limits
        };
        assert_eq!(no_decay.retry_after(20_000.0), 1);
    }

    #[test]
    fn a_broadcast_pays_for_its_bytes_its_legacy_hashing_and_a_refusal() {
        let tx = bitcoin::Transaction {
            version: bitcoin::transaction::Version::TWO,
            lock_time: bitcoin::absolute::LockTime::ZERO,
            input: vec![bitcoin::TxIn::default(); 10],
            output: vec![bitcoin::TxOut::NULL],
        };
        let raw = bitcoin::consensus::serialize(&tx);
        let base = raw.len() as u64;
        let taken = broadcast_checks(&[&raw], false, 0);
        assert_eq!(
            taken.rows,
            base / 20 + 10 * base / 1_000 + 10 * SIGNATURE_CHECK_ROWS
        );
        assert_eq!(broadcast_checks(&[&raw], true, 0).rows, taken.rows + 500);
        assert_eq!(
            broadcast_checks(&[b"junk"], true, 0).rows,
            500,
            "nothing hashed"
        );
        // 100 clusters of 64 linearized before and after a replacement: 2,048 rows more.
        let linearized = 2 * 100 * 64 * 64;
        assert_eq!(
            broadcast_checks(&[&raw], true, linearized).rows,
            taken.rows + 500 + 2_048
        );
    }

    #[test]
    fn signature_checks_are_read_from_the_scripts_an_input_carries() {
        use bitcoin::opcodes::all::*;
        use bitcoin::script::Builder;
        let key = [2u8; 33];
        let multisig = |m: i64, n: usize| {
            let mut b = Builder::new().push_int(m);
            for _ in 0..n {
                b = b.push_slice(key);
            }
            b.push_int(n as i64)
                .push_opcode(OP_CHECKMULTISIG)
                .into_script()
        };
        let redeem = multisig(1, 15);
        let p2sh = bitcoin::TxIn {
            script_sig: Builder::new()
                .push_int(0)
                .push_slice([0x30; 72])
                .push_slice(<&bitcoin::script::PushBytes>::try_from(redeem.as_bytes()).unwrap())
                .into_script(),
            ..bitcoin::TxIn::default()
        };
        let with_witness = |items: &[Vec<u8>]| bitcoin::TxIn {
            witness: bitcoin::Witness::from_slice(items),
            ..bitcoin::TxIn::default()
        };
        let p2wsh = with_witness(&[
            vec![],
            vec![0x30; 72],
            vec![0x30; 72],
            multisig(2, 3).to_bytes(),
        ]);
        let leaf = Builder::new()
            .push_slice([3u8; 32])
            .push_opcode(OP_CHECKSIG)
            .push_slice([4u8; 32])
            .push_opcode(OP_CHECKSIGADD)
            .push_slice([5u8; 32])
            .push_opcode(OP_CHECKSIGADD)
            .push_int(2)
            .push_opcode(OP_NUMEQUAL)
            .into_script();
        let tapscript = with_witness(&[vec![1; 64], vec![2; 64], leaf.to_bytes(), vec![0xc0; 33]]);
        let p2wpkh = with_witness(&[vec![0x30; 72], key.to_vec()]);
        let tx = |input: bitcoin::TxIn| bitcoin::Transaction {
            version: bitcoin::transaction::Version::TWO,
            lock_time: bitcoin::absolute::LockTime::ZERO,
            input: vec![input],
            output: vec![bitcoin::TxOut::NULL],
        };
        assert_eq!(signature_checks(&tx(p2sh)), 15, "1-of-15 tries every key");
        assert_eq!(signature_checks(&tx(p2wsh)), 3);
        assert_eq!(
            signature_checks(&tx(tapscript)),
            3,
            "OP_CHECKSIGADD counted"
        );
        assert_eq!(signature_checks(&tx(p2wpkh)), 1);
        // A witness script of a signature's length is read all the same: 36 checks.
        let mut dense = Builder::new();
        for _ in 0..35 {
            dense = dense.push_opcode(OP_2DUP).push_opcode(OP_CHECKSIGVERIFY);
        }
        let dense = dense.push_opcode(OP_CHECKSIG).into_script();
        assert_eq!(dense.len(), 71);
        let dense = with_witness(&[vec![0x30; 72], key.to_vec(), dense.to_bytes()]);
        assert_eq!(signature_checks(&tx(dense)), 36);
        let key_path = with_witness(&[vec![0xae; 64]]);
        assert_eq!(
            signature_checks(&tx(key_path)),
            1,
            "a signature is no script"
        );
    }

    #[test]
    fn a_unit_is_electrumx_bandwidth_unit_or_its_worth_in_reads() {
        let nothing = Cost::default();
        assert_eq!(units(0, nothing, 5_000), 1.0);
        let rows = Cost {
            rows: 50,
            bytes: 50_000,
        };
        assert_eq!(units(0, rows, 0), 2.0);
        assert!((units(20, nothing, 0) - 1.0).abs() < 1e-9);
    }
}
