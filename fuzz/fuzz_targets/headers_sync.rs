//! Headers presync (`cairn::p2p::headers_sync`, Core's `HeadersSyncState`): the input spells
//! a chain (each header's difficulty kept or changed, and a salt), the rules (mainnet's
//! retargeting or regtest's, a commitment period, a redownload buffer, the work required) and
//! how a peer serves it: in messages of some size, once for PRESYNC and again, perhaps altered,
//! for REDOWNLOAD. Whatever it is, what the sync releases is a prefix of what the peer served
//! the second time, chained from the start; nothing is released from a chain without the work;
//! and an honest peer with enough work gets its whole chain released. The proof-of-work checks
//! run on the same headers.
#![no_main]

use bitcoin::block::{Header, Version};
use bitcoin::hashes::Hash;
use bitcoin::pow::{CompactTarget, Work};
use bitcoin::{BlockHash, TxMerkleNode};
use cairn::kernel::{header_work, HeaderEntry};
use cairn::p2p::headers_sync::{
    check_pow, claimed_work, derive_target, permitted_difficulty_transition, ChainRules,
    HeadersSync,
};
use cairn::types::Network;
use libfuzzer_sys::fuzz_target;

const BITS: [u32; 6] = [
    0x1d00_ffff,
    0x1c3f_ffc0,
    0x1d03_fffc,
    0x207f_ffff,
    0x1b04_864c,
    0x1d01_0000,
];

struct Script<'a>(&'a [u8]);

impl Script<'_> {
    fn byte(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        b
    }
}

fn header(prev: BlockHash, bits: CompactTarget, salt: u8, i: usize) -> Header {
    Header {
        version: Version::from_consensus(0x2000_0000),
        prev_blockhash: prev,
        merkle_root: TxMerkleNode::from_byte_array([salt; 32]),
        time: 1_700_000_000 + i as u32 * 600,
        bits,
        nonce: i as u32,
    }
}

fn chain(start: &HeaderEntry, n: usize, s: &mut Script) -> Vec<Header> {
    let mut out: Vec<Header> = Vec::with_capacity(n);
    let mut bits = start.bits;
    for i in 0..n {
        let choice = s.byte();
        if choice & 0xf0 == 0xf0 {
            bits = CompactTarget::from_consensus(BITS[usize::from(choice) % BITS.len()]);
        }
        let prev = out.last().map_or(start.hash, Header::block_hash);
        out.push(header(prev, bits, s.byte(), i));
    }
    out
}

/// Sends `headers` in messages of `size` (the last one short), as a peer answers each request;
/// returns whether every message was taken. In PRESYNC it stops once the sync asks from the
/// start again (it has the work: the peer serves the chain a second time).
fn serve(
    sync: &mut HeadersSync,
    headers: &[Header],
    size: usize,
    presync: bool,
    out: &mut Vec<Header>,
) -> bool {
    for (n, message) in headers.chunks(size).enumerate() {
        let full = (n + 1) * size < headers.len();
        let processed = sync.process(message, full);
        out.extend(processed.released);
        if !processed.success || !processed.request_more {
            return processed.success;
        }
        if presync && sync.locator_head() == sync.chain_start() {
            return true;
        }
    }
    true
}

fn one() -> Work {
    let mut b = [0u8; 32];
    b[31] = 1;
    Work::from_be_bytes(b)
}

fuzz_target!(|data: &[u8]| {
    let mut s = Script(data);
    let mode = s.byte();
    let network = if mode & 1 == 0 {
        Network::Regtest
    } else {
        Network::Mainnet
    };
    let mut rules = ChainRules::of(network, false);
    rules.commitment_period = u32::from(s.byte() % 16) + 1;
    rules.redownload_buffer_size = usize::from(s.byte() % 32);
    let start_bits = CompactTarget::from_consensus(BITS[usize::from(s.byte()) % BITS.len()]);
    // The header the peer's chain builds on, as the kernel knows it.
    let start_header = header(BlockHash::all_zeros(), start_bits, s.byte(), 0);
    let start = HeaderEntry {
        hash: start_header.block_hash(),
        // Just below a retarget, so that mainnet's difficulty rules are reached.
        height: 2015 - i64::from(s.byte() % 4),
        bits: start_bits,
        median_time_past: 1_700_000_000,
        chain_work: header_work(start_bits),
    };
    let n = usize::from(s.byte() % 128);
    let needed = usize::from(s.byte() % 160);
    let size = usize::from(s.byte() % 40) + 1;
    let now = 1_700_000_000 + u64::from(s.byte()) * 3600;
    let tamper = s.byte();
    let headers = chain(&start, n, &mut s);

    let _ = check_pow(&headers, rules.pow_limit);
    for h in &headers {
        let _ = derive_target(h.bits, rules.pow_limit);
    }
    let total = start.chain_work + claimed_work(&headers);
    let required = if needed > n {
        total + one()
    } else {
        start.chain_work + claimed_work(&headers[..needed])
    };
    let mut sync = HeadersSync::new(start, start_header, required, &rules, now);

    let mut released = Vec::new();
    let presynced = serve(&mut sync, &headers, size, true, &mut released);
    assert!(released.is_empty(), "PRESYNC released headers");
    // The second download, as served: the same, or one header altered (the rest rebuilt on it
    // when `tamper` says so).
    let mut second = headers.clone();
    let at = usize::from(tamper) % n.max(1);
    if tamper & 0x80 != 0 && at < second.len() {
        second[at].nonce ^= 0x5555;
        if tamper & 0x40 != 0 {
            for i in at + 1..second.len() {
                second[i].prev_blockhash = second[i - 1].block_hash();
            }
        }
    }
    if presynced && !sync.is_final() {
        serve(&mut sync, &second, size, false, &mut released);
    }

    let mut prev = start.hash;
    for (i, h) in released.iter().enumerate() {
        assert_eq!(h, &second[i], "released header {i} is not the one served");
        assert_eq!(h.prev_blockhash, prev, "released headers do not chain");
        prev = h.block_hash();
    }
    if total < required {
        assert!(released.is_empty(), "released a chain without the work");
    }
    let permitted = headers.iter().enumerate().all(|(i, h)| {
        let old = if i == 0 {
            start.bits
        } else {
            headers[i - 1].bits
        };
        permitted_difficulty_transition(&rules, start.height + 1 + i as i64, old, h.bits)
    });
    let max_commitments =
        6 * (now.saturating_sub(1_700_000_000) + 7200) / u64::from(rules.commitment_period);
    let commitments = (n as u64) / u64::from(rules.commitment_period) + 1;
    // The header whose work first reaches what is required: released, with its message.
    let reached = (0..n).find(|&k| start.chain_work + claimed_work(&headers[..=k]) >= required);
    let honest = tamper & 0x80 == 0 && permitted && commitments < max_commitments;
    if let (true, Some(k)) = (honest, reached) {
        assert!(
            released.len() > k,
            "an honest chain with the work was held back"
        );
    }
});
