//! Headers presync, as Bitcoin Core's `HeadersSyncState` (src/headerssync.cpp) and the checks
//! net_processing does before it (`CheckHeadersPoW`, `GetAntiDoSWorkThreshold`): a peer's chain
//! reaches the kernel only once it is known to have enough work, so cheap low-work headers are
//! never stored. A chain below the threshold is first downloaded without being kept (PRESYNC:
//! its work summed, one secret bit of a salted hash kept every `commitment_period` headers),
//! then downloaded again (REDOWNLOAD: each kept bit checked, `redownload_buffer_size` headers
//! held back) and released only as it matches; a peer that serves another chain the second
//! time is caught by the bits. The kernel's C API has no `nMinimumChainWork` nor headers-sync
//! parameters: they are taken from the chain parameters of the Core the kernel is built from
//! (`kernel/chainparams.cpp` of libbitcoinkernel-sys 0.4.1, Core 31).

use std::collections::hash_map::RandomState;
use std::collections::VecDeque;
use std::hash::BuildHasher;

use bitcoin::block::{Header, Version};
use bitcoin::params::Params;
use bitcoin::pow::{CompactTarget, Target, Work};
use bitcoin::{BlockHash, TxMerkleNode};
use rand::Rng;

use crate::kernel::{header_work, HeaderEntry};
use crate::types::Network;

/// Core's `MAX_FUTURE_BLOCK_TIME`: how far ahead of now a header's time may be.
const MAX_FUTURE_BLOCK_TIME: u64 = 2 * 60 * 60;

/// The chain's rules that headers sync follows.
#[derive(Debug, Clone)]
pub struct ChainRules {
    /// The consensus parameters (proof of work, retargeting).
    pub params: Params,
    /// Core's `powLimit`, exactly (the `bitcoin` crate's is rounded to a compact target).
    pub pow_limit: Target,
    /// Core's `nMinimumChainWork`: a chain with less is never stored.
    pub minimum_chain_work: Work,
    /// Heights between two kept bits (Core's `HeadersSyncParams::commitment_period`).
    pub commitment_period: u32,
    /// Headers held back during REDOWNLOAD (`HeadersSyncParams::redownload_buffer_size`).
    pub redownload_buffer_size: usize,
}

impl ChainRules {
    /// The rules of `network` (a custom signet has no minimum work, as in Core).
    pub fn of(network: Network, custom_signet: bool) -> ChainRules {
        const ZERO: &str = "0000000000000000000000000000000000000000000000000000000000000000";
        let work =
            |hex: &str| Work::from_unprefixed_hex(hex).unwrap_or(Work::from_be_bytes([0; 32]));
        let (min, period, buffer) = match network {
            Network::Mainnet => (
                "0000000000000000000000000000000000000001128750f82f4c366153a3a030",
                641,
                15218,
            ),
            Network::Testnet4 => (
                "0000000000000000000000000000000000000000000009a0fe15d0177d086304",
                606,
                16092,
            ),
            Network::Signet if custom_signet => (ZERO, 620, 15724),
            Network::Signet => (
                "00000000000000000000000000000000000000000000000000000b463ea0a4b8",
                620,
                15724,
            ),
            Network::Regtest => (ZERO, 275, 7017),
        };
        let limit = match network {
            Network::Mainnet | Network::Testnet4 => {
                "00000000ffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
            }
            Network::Signet => "00000377ae000000000000000000000000000000000000000000000000000000",
            Network::Regtest => "7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        };
        ChainRules {
            pow_limit: Target::from_unprefixed_hex(limit).unwrap_or(Target::MAX),
            params: Params::new(network.to_bitcoin()),
            minimum_chain_work: work(min),
            commitment_period: period,
            redownload_buffer_size: buffer,
        }
    }

    /// Core's `GetAntiDoSWorkThreshold`: the work a chain needs to be stored, the larger of the
    /// minimum chain work and the tip's less 144 blocks of the tip's work.
    pub fn anti_dos_threshold(&self, tip: &HeaderEntry) -> Work {
        let block = header_work(tip.bits);
        let buffer = (0..144).fold(Work::from_be_bytes([0; 32]), |sum, _| sum + block);
        let near = tip.chain_work - buffer.min(tip.chain_work);
        near.max(self.minimum_chain_work)
    }
}

/// Core's `DeriveTarget` (`CheckProofOfWork` without the hash): the target `bits` encodes, if
/// it is positive, does not overflow and is within the chain's limit.
pub fn derive_target(bits: CompactTarget, pow_limit: Target) -> Option<Target> {
    let compact = bits.to_consensus();
    let size = compact >> 24;
    let word = compact & 0x007f_ffff;
    let negative = word != 0 && compact & 0x0080_0000 != 0;
    let overflow =
        word != 0 && (size > 34 || (word > 0xff && size > 33) || (word > 0xffff && size > 32));
    let target = Target::from_compact(bits);
    (!negative && !overflow && target != Target::ZERO && target <= pow_limit).then_some(target)
}

/// Core's `CheckHeadersPoW`: every header's proof of work is valid and each builds on the one
/// before. The error says which rule broke (a ban, as Core's `Misbehaving`).
pub fn check_pow(headers: &[Header], pow_limit: Target) -> Result<(), &'static str> {
    for h in headers {
        let target = derive_target(h.bits, pow_limit).ok_or("header with invalid proof of work")?;
        if !target.is_met_by(h.block_hash()) {
            return Err("header with invalid proof of work");
        }
    }
    if headers
        .windows(2)
        .any(|w| w[1].prev_blockhash != w[0].block_hash())
    {
        return Err("non-continuous headers sequence");
    }
    Ok(())
}

/// Core's `CalculateClaimedHeadersWork`.
pub fn claimed_work(headers: &[Header]) -> Work {
    headers.iter().fold(Work::from_be_bytes([0; 32]), |sum, h| {
        sum + header_work(h.bits)
    })
}

/// Core's `PermittedDifficultyTransition`: whether `new` may follow `old` at `height`: equal
/// between retargets, within a factor of four (as compact targets round) at one. Networks that
/// allow minimum-difficulty blocks (testnets, regtest) permit anything.
pub fn permitted_difficulty_transition(
    rules: &ChainRules,
    height: i64,
    old: CompactTarget,
    new: CompactTarget,
) -> bool {
    let params = &rules.params;
    if params.allow_min_difficulty_blocks {
        return true;
    }
    let interval = i64::try_from(params.difficulty_adjustment_interval()).unwrap_or(i64::MAX);
    if height % interval != 0 {
        return old == new;
    }
    let round = |t: Target| Target::from_compact(t.to_compact_lossy());
    let observed = Target::from_compact(new);
    let old = Target::from_compact(old);
    let largest = old
        .max_transition_threshold_unchecked()
        .min(rules.pow_limit);
    let smallest = old.min_transition_threshold().min(rules.pow_limit);
    round(largest) >= observed && round(smallest) <= observed
}

/// A header without its parent's hash (Core's `CompressedHeader`, 48 bytes): the redownload
/// buffer's entries, each rebuilt from the one before.
#[derive(Debug, Clone, Copy)]
struct Compressed {
    version: Version,
    merkle_root: TxMerkleNode,
    time: u32,
    bits: CompactTarget,
    nonce: u32,
}

impl Compressed {
    fn of(h: &Header) -> Self {
        Compressed {
            version: h.version,
            merkle_root: h.merkle_root,
            time: h.time,
            bits: h.bits,
            nonce: h.nonce,
        }
    }

    fn full(&self, prev_blockhash: BlockHash) -> Header {
        Header {
            version: self.version,
            prev_blockhash,
            merkle_root: self.merkle_root,
            time: self.time,
            bits: self.bits,
            nonce: self.nonce,
        }
    }
}

/// A queue of bits, 64 to a word (Core's `bitdeque`): a long chain's commitments cost a bit
/// each.
#[derive(Default)]
struct Bits {
    words: VecDeque<u64>,
    /// Where the first bit is in the first word.
    front: usize,
    len: usize,
}

impl Bits {
    fn push(&mut self, bit: bool) {
        let at = self.front + self.len;
        if at / 64 >= self.words.len() {
            self.words.push_back(0);
        }
        if bit {
            self.words[at / 64] |= 1 << (at % 64);
        }
        self.len += 1;
    }

    fn pop(&mut self) -> Option<bool> {
        if self.len == 0 {
            return None;
        }
        let bit = self.words.front()? >> self.front & 1 == 1;
        self.len -= 1;
        self.front += 1;
        if self.front == 64 || self.len == 0 {
            self.words.pop_front();
            self.front = 0;
        }
        Some(bit)
    }
}

/// Where a sync is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Presync,
    Redownload,
    Final,
}

/// What one `headers` message did to a sync.
#[derive(Debug, Default)]
pub struct Processed {
    /// Headers checked against the commitments, for the kernel (oldest first).
    pub released: Vec<Header>,
    /// Whether the message was taken (else the sync ended on it).
    pub success: bool,
    /// Whether to ask the peer for more (`getheaders` from [`HeadersSync::locator_head`]).
    pub request_more: bool,
}

/// One peer's headers presync (Core's `HeadersSyncState`).
pub struct HeadersSync {
    phase: Phase,
    rules: ChainRules,
    chain_start: HeaderEntry,
    minimum_required_work: Work,
    commit_offset: u32,
    hasher: RandomState,
    commitments: Bits,
    max_commitments: u64,
    /// PRESYNC: the work so far, the last header and its height.
    current_work: Work,
    last: Header,
    last_height: i64,
    /// REDOWNLOAD: the held-back headers, the hash before the first, the last's hash and
    /// height, the work so far, and whether it has passed the minimum (then all is released).
    buffer: VecDeque<Compressed>,
    buffer_first_prev: BlockHash,
    buffer_last: BlockHash,
    buffer_last_bits: CompactTarget,
    buffer_last_height: i64,
    redownload_work: Work,
    release_all: bool,
}

impl HeadersSync {
    /// A sync of the chain a peer builds on `chain_start` (a header `start_header` the kernel
    /// has), needing `minimum_required_work`; `now` in seconds since the epoch.
    pub fn new(
        chain_start: HeaderEntry,
        start_header: Header,
        minimum_required_work: Work,
        rules: &ChainRules,
        now: u64,
    ) -> Self {
        let period = rules.commitment_period.max(1);
        let since = now.saturating_sub(u64::from(chain_start.median_time_past));
        HeadersSync {
            phase: Phase::Presync,
            commit_offset: rand::thread_rng().gen_range(0..period),
            hasher: RandomState::new(),
            commitments: Bits::default(),
            max_commitments: 6 * (since + MAX_FUTURE_BLOCK_TIME) / u64::from(period),
            current_work: chain_start.chain_work,
            last: start_header,
            last_height: chain_start.height,
            buffer: VecDeque::new(),
            buffer_first_prev: chain_start.hash,
            buffer_last: chain_start.hash,
            buffer_last_bits: chain_start.bits,
            buffer_last_height: chain_start.height,
            redownload_work: chain_start.chain_work,
            release_all: false,
            rules: rules.clone(),
            chain_start,
            minimum_required_work,
        }
    }

    /// The header the peer's chain builds on.
    pub fn chain_start(&self) -> BlockHash {
        self.chain_start.hash
    }

    /// The first entry of the next request's locator (the rest is the chain start's locator).
    pub fn locator_head(&self) -> BlockHash {
        match self.phase {
            Phase::Presync => self.last.block_hash(),
            _ => self.buffer_last,
        }
    }

    /// Whether the sync has ended (completed or aborted): it takes nothing more.
    pub fn is_final(&self) -> bool {
        self.phase == Phase::Final
    }

    /// The height the first download (PRESYNC) reached.
    pub fn height(&self) -> i64 {
        self.last_height
    }

    /// Takes the next `headers` message (`full`: it had the most headers a message may).
    pub fn process(&mut self, headers: &[Header], full: bool) -> Processed {
        let mut out = Processed::default();
        match self.phase {
            Phase::Final => return out,
            _ if headers.is_empty() => return out,
            Phase::Presync => {
                out.success = self.presync(headers);
                out.request_more = out.success && (full || self.phase == Phase::Redownload);
            }
            Phase::Redownload => {
                out.success = headers.iter().all(|h| self.redownloaded(h));
                if out.success {
                    out.released = self.ready();
                    let done = self.buffer.is_empty() && self.release_all;
                    out.request_more = !done && full;
                }
            }
        }
        if !(out.success && out.request_more) {
            self.finish();
        }
        out
    }

    /// PRESYNC (Core's `ValidateAndStoreHeadersCommitments`).
    fn presync(&mut self, headers: &[Header]) -> bool {
        if headers[0].prev_blockhash != self.last.block_hash() {
            return false;
        }
        for h in headers {
            let height = self.last_height + 1;
            if !permitted_difficulty_transition(&self.rules, height, self.last.bits, h.bits) {
                return false;
            }
            if self.is_commitment_height(height) {
                self.commitments.push(self.bit(h));
                if self.commitments.len as u64 > self.max_commitments {
                    return false;
                }
            }
            self.current_work = self.current_work + header_work(h.bits);
            self.last = *h;
            self.last_height = height;
        }
        if self.current_work >= self.minimum_required_work {
            self.phase = Phase::Redownload;
        }
        true
    }

    /// REDOWNLOAD, one header (Core's `ValidateAndStoreRedownloadedHeader`).
    fn redownloaded(&mut self, h: &Header) -> bool {
        let height = self.buffer_last_height + 1;
        if h.prev_blockhash != self.buffer_last {
            return false;
        }
        // The last header redownloaded, released or not (Core reads the buffer's back, which a
        // buffer of size 0 would have emptied).
        if !permitted_difficulty_transition(&self.rules, height, self.buffer_last_bits, h.bits) {
            return false;
        }
        self.redownload_work = self.redownload_work + header_work(h.bits);
        if self.redownload_work >= self.minimum_required_work {
            self.release_all = true;
        }
        if !self.release_all && self.is_commitment_height(height) {
            match self.commitments.pop() {
                Some(expected) if expected == self.bit(h) => {}
                _ => return false,
            }
        }
        self.buffer.push_back(Compressed::of(h));
        self.buffer_last = h.block_hash();
        self.buffer_last_bits = h.bits;
        self.buffer_last_height = height;
        true
    }

    /// Core's `PopHeadersReadyForAcceptance`.
    fn ready(&mut self) -> Vec<Header> {
        let mut out = Vec::new();
        while self.buffer.len() > self.rules.redownload_buffer_size
            || (!self.buffer.is_empty() && self.release_all)
        {
            let Some(c) = self.buffer.pop_front() else {
                break;
            };
            let h = c.full(self.buffer_first_prev);
            self.buffer_first_prev = h.block_hash();
            out.push(h);
        }
        out
    }

    fn is_commitment_height(&self, height: i64) -> bool {
        height.rem_euclid(i64::from(self.rules.commitment_period.max(1)))
            == i64::from(self.commit_offset)
    }

    fn bit(&self, h: &Header) -> bool {
        self.hasher.hash_one(h.block_hash()) & 1 == 1
    }

    /// Frees everything (Core's `Finalize`): a sync is never reused, so its salt is not either.
    fn finish(&mut self) {
        self.phase = Phase::Final;
        self.commitments = Bits::default();
        self.buffer = VecDeque::new();
    }
}

#[cfg(test)]
mod tests;
