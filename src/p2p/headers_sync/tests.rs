use super::*;

/// A regtest header on `prev` with valid proof of work.
fn mined(prev: BlockHash, time: u32, salt: u32) -> Header {
    let mut h = Header {
        version: Version::from_consensus(0x2000_0000),
        prev_blockhash: prev,
        merkle_root: TxMerkleNode::from_byte_array([salt as u8; 32]),
        time,
        bits: CompactTarget::from_consensus(0x207f_ffff),
        nonce: salt,
    };
    while !h.target().is_met_by(h.block_hash()) {
        h.nonce = h.nonce.wrapping_add(1);
    }
    h
}

/// `n` headers on `start`, each salted so that two chains differ.
fn chain_on(start: &Header, n: usize, salt: u32) -> Vec<Header> {
    let mut out: Vec<Header> = Vec::with_capacity(n);
    for i in 0..n {
        let prev = out.last().unwrap_or(start);
        out.push(mined(
            prev.block_hash(),
            prev.time + 1,
            salt.wrapping_add(i as u32 * 7),
        ));
    }
    out
}

fn genesis() -> (Header, HeaderEntry) {
    let header = bitcoin::blockdata::constants::genesis_block(bitcoin::Network::Regtest).header;
    let entry = HeaderEntry {
        hash: header.block_hash(),
        height: 0,
        bits: header.bits,
        median_time_past: header.time,
        chain_work: header_work(header.bits),
    };
    (header, entry)
}

fn regtest(period: u32, buffer: usize) -> ChainRules {
    ChainRules {
        commitment_period: period,
        redownload_buffer_size: buffer,
        ..ChainRules::of(Network::Regtest, false)
    }
}

use bitcoin::hashes::Hash;

const NOW: u64 = 2_000_000_000;

#[test]
fn targets_and_proof_of_work_are_checked_as_core_does() {
    let params = ChainRules::of(Network::Regtest, false).pow_limit;
    assert!(derive_target(CompactTarget::from_consensus(0x207f_ffff), params).is_some());
    // Negative, zero, overflowing, above the limit.
    for bits in [0x04923456, 0x0000_0000, 0xff12_3456, 0x2100_ffff] {
        let derived = derive_target(CompactTarget::from_consensus(bits), params);
        assert_eq!(derived, None, "{bits:#x}");
    }
    let (g, _) = genesis();
    let headers = chain_on(&g, 5, 1);
    assert_eq!(check_pow(&headers, params), Ok(()));
    let mut gap = headers.clone();
    gap.remove(2);
    assert_eq!(
        check_pow(&gap, params),
        Err("non-continuous headers sequence")
    );
    let mut weak = headers.clone();
    // A nonce whose hash misses the target (half of them do on regtest).
    while weak[4].target().is_met_by(weak[4].block_hash()) {
        weak[4].nonce += 1;
    }
    assert_eq!(
        check_pow(&weak, params),
        Err("header with invalid proof of work")
    );
}

#[test]
fn difficulty_moves_only_at_retargets_and_by_four_at_most() {
    let main = ChainRules::of(Network::Mainnet, false);
    let bits = CompactTarget::from_consensus(0x1703_4219);
    let other = CompactTarget::from_consensus(0x1703_4218);
    assert!(permitted_difficulty_transition(&main, 2017, bits, bits));
    assert!(!permitted_difficulty_transition(&main, 2017, bits, other));
    assert!(permitted_difficulty_transition(&main, 2016, bits, other));
    let t = Target::from_compact(bits);
    let four_times_easier = t.max_transition_threshold_unchecked().to_compact_lossy();
    let five_times_easier = Target::from_compact(four_times_easier)
        .max_transition_threshold_unchecked()
        .to_compact_lossy();
    assert!(permitted_difficulty_transition(
        &main,
        4032,
        bits,
        four_times_easier
    ));
    assert!(!permitted_difficulty_transition(
        &main,
        4032,
        bits,
        five_times_easier
    ));
    let quarter = t.min_transition_threshold().to_compact_lossy();
    assert!(permitted_difficulty_transition(&main, 4032, bits, quarter));
    let eighth = Target::from_compact(quarter)
        .min_transition_threshold()
        .to_compact_lossy();
    assert!(!permitted_difficulty_transition(&main, 4032, bits, eighth));
    // Regtest allows minimum-difficulty blocks: anything goes.
    let reg = ChainRules::of(Network::Regtest, false);
    assert!(permitted_difficulty_transition(&reg, 7, bits, other));
}

#[test]
fn the_threshold_is_the_tip_less_144_blocks_or_the_minimum() {
    let (_, mut tip) = genesis();
    let block = header_work(tip.bits);
    let rules = regtest(275, 7017);
    tip.chain_work = (0..200).fold(Work::from_be_bytes([0; 32]), |s, _| s + block);
    let expected = (0..56).fold(Work::from_be_bytes([0; 32]), |s, _| s + block);
    assert_eq!(rules.anti_dos_threshold(&tip), expected);
    tip.chain_work = block;
    assert_eq!(rules.anti_dos_threshold(&tip), Work::from_be_bytes([0; 32]));
    let main = ChainRules::of(Network::Mainnet, false);
    assert_eq!(main.anti_dos_threshold(&tip), main.minimum_chain_work);
}

#[test]
fn a_chain_with_the_work_is_released_on_its_second_download() {
    let (g, start) = genesis();
    let block = header_work(start.bits);
    let needed = (0..3001).fold(Work::from_be_bytes([0; 32]), |s, _| s + block);
    let rules = regtest(25, 500);
    let chain = chain_on(&g, 4000, 3);
    let mut sync = HeadersSync::new(start, g, needed, &rules, NOW);
    let first = sync.process(&chain[..2000], true);
    assert!(first.success && first.request_more && first.released.is_empty());
    assert_eq!(sync.locator_head(), chain[1999].block_hash());
    // The work is reached within the next message: it is asked for again from the start.
    let second = sync.process(&chain[2000..4000], true);
    assert!(second.success && second.request_more && second.released.is_empty());
    assert_eq!(sync.locator_head(), g.block_hash());
    // The second download: held back past the buffer until the work is reached, then all.
    let third = sync.process(&chain[..2000], true);
    assert!(third.success && third.request_more);
    assert_eq!(third.released, chain[..1500].to_vec());
    let fourth = sync.process(&chain[2000..4000], true);
    assert!(fourth.success && !fourth.request_more);
    assert_eq!(fourth.released, chain[1500..4000].to_vec());
    assert!(sync.is_final());
}

#[test]
fn another_chain_on_the_second_download_is_caught_by_the_commitments() {
    let (g, start) = genesis();
    let block = header_work(start.bits);
    let needed = (0..2001).fold(Work::from_be_bytes([0; 32]), |s, _| s + block);
    // A bit at every height: a chain that differs anywhere fails (but for 1 in 2^n).
    let rules = regtest(1, 100);
    let honest = chain_on(&g, 2000, 5);
    let mut sync = HeadersSync::new(start, g, needed, &rules, NOW);
    assert!(sync.process(&honest, true).request_more);
    let forged = chain_on(&g, 2000, 6);
    let out = sync.process(&forged, true);
    assert!(!out.success && out.released.is_empty() && sync.is_final());
}

#[test]
fn a_short_low_work_chain_ends_the_sync_and_a_broken_one_fails_it() {
    let (g, start) = genesis();
    let needed = Work::from_be_bytes([0xff; 32]);
    let rules = regtest(275, 7017);
    let chain = chain_on(&g, 2100, 7);
    let mut sync = HeadersSync::new(start, g, needed, &rules, NOW);
    assert!(sync.process(&chain[..2000], true).request_more);
    let short = sync.process(&chain[2000..], false);
    assert!(short.success && !short.request_more && sync.is_final());
    let mut sync = HeadersSync::new(start, g, needed, &rules, NOW);
    assert!(
        !sync.process(&chain[1..2001], true).success,
        "does not connect"
    );
}

#[test]
fn commitments_are_capped_by_the_time_since_the_start() {
    let (g, start) = genesis();
    let rules = regtest(1, 100);
    // A start 60 s before now: at most 6 headers a second over 60 s and 2 h of future times,
    // one bit each here.
    let now = u64::from(start.median_time_past) + 60;
    let mut sync = HeadersSync::new(start, g, Work::from_be_bytes([0xff; 32]), &rules, now);
    let cap = 6 * (60 + 7200);
    let mut last = g;
    let mut messages = 0;
    while !sync.is_final() {
        let more = chain_on(&last, 2000, messages * 2000 + 11);
        last = *more.last().unwrap();
        let out = sync.process(&more, true);
        messages += 1;
        assert!(
            out.success || sync.height() >= cap,
            "failed early at {}",
            sync.height()
        );
    }
    assert!(
        sync.height() >= cap && sync.height() < cap + 2000,
        "{}",
        sync.height()
    );
}

#[test]
fn bits_queue_in_order() {
    let mut bits = Bits::default();
    let pattern: Vec<bool> = (0..300).map(|i| i % 3 == 0 || i % 7 == 0).collect();
    for b in &pattern {
        bits.push(*b);
    }
    let popped: Vec<bool> = std::iter::from_fn(|| bits.pop()).collect();
    assert_eq!(popped, pattern);
    bits.push(true);
    assert_eq!(bits.pop(), Some(true));
    assert_eq!(bits.pop(), None);
}

/// Found by the `headers_sync` fuzz target: with nothing held back (a buffer of 0), the next
/// message's first header was checked against the chain start's difficulty instead of the
/// header before it, so a mainnet chain that retargeted failed its second download.
#[test]
fn a_retarget_is_followed_across_messages_with_nothing_held_back() {
    let rules = ChainRules {
        commitment_period: 4,
        redownload_buffer_size: 0,
        ..ChainRules::of(Network::Mainnet, false)
    };
    let (easy, hard) = (0x1d00_ffff, 0x1c3f_ffc0);
    let start_header = Header {
        bits: CompactTarget::from_consensus(easy),
        ..genesis().0
    };
    let start = HeaderEntry {
        hash: start_header.block_hash(),
        height: 2015,
        bits: start_header.bits,
        median_time_past: start_header.time,
        chain_work: header_work(start_header.bits),
    };
    // Heights 2016 to 2020, four times harder from the retarget on (no proof of work needed
    // here: presync checks difficulty transitions, not hashes).
    let mut chain: Vec<Header> = Vec::new();
    for i in 0..5u32 {
        let prev = chain.last().map_or(start.hash, Header::block_hash);
        chain.push(Header {
            prev_blockhash: prev,
            bits: CompactTarget::from_consensus(hard),
            nonce: i,
            ..start_header
        });
    }
    let needed = start.chain_work + claimed_work(&chain);
    let now = u64::from(start.median_time_past) + 3600;
    let mut sync = HeadersSync::new(start, start_header, needed, &rules, now);
    for h in &chain {
        assert!(sync.process(std::slice::from_ref(h), true).success);
    }
    assert_eq!(sync.locator_head(), start.hash, "the work is reached");
    let mut released = Vec::new();
    for h in &chain {
        let done = sync.process(std::slice::from_ref(h), true);
        assert!(done.success, "header {} refused", h.nonce);
        released.extend(done.released);
    }
    assert_eq!(released, chain);
}
