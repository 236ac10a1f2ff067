//! TRUC (version 3) topology and sizes, alone, with sibling eviction and in package dry runs.

use super::*;
use crate::config::TrucPolicy;

/// A pool enforcing TRUC that takes every script as valid.
fn pool() -> Mempool {
    let config = MempoolConfig {
        persist: false,
        truc: TrucPolicy::Enforce,
        ..MempoolConfig::knots()
    };
    Mempool::with_script_check(config, all_scripts_valid)
}

/// `tx` as version 3.
fn v3(mut tx: Transaction) -> Transaction {
    tx.version = Version(3);
    tx
}

/// The TRUC reason of a refusal.
fn truc_reason(result: Result<Accepted, Rejection>) -> &'static str {
    match result {
        Err(Rejection::Truc { reason, .. }) => reason,
        other => panic!("expected a TRUC refusal, got {other:?}"),
    }
}

/// `n` outputs of `sats` each: about 31 vbytes an output.
fn outputs(n: usize, sats: u64) -> Vec<u64> {
    vec![sats; n]
}

#[test]
fn versions_three_and_others_do_not_spend_each_other_unconfirmed() {
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 100_000), coins.add(2, 100_000));
    let pool = pool();
    let truc_parent = v3(spend(&[a], &[99_000]));
    let plain_parent = spend(&[b], &[99_000]);
    accept(&pool, &coins, &truc_parent).unwrap();
    accept(&pool, &coins, &plain_parent).unwrap();
    let plain_child = spend(&[out(&truc_parent, 0)], &[98_000]);
    assert_eq!(
        truc_reason(accept(&pool, &coins, &plain_child)),
        "truc-spent-by-nontruc"
    );
    let truc_child = v3(spend(&[out(&plain_parent, 0)], &[98_000]));
    assert_eq!(
        truc_reason(accept(&pool, &coins, &truc_child)),
        "truc-spends-nontruc"
    );
    // Confirmed, a version 3 output is anyone's to spend.
    coins.confirm(&truc_parent);
    pool.revalidate_from(&coins);
    accept(&pool, &coins, &plain_child).unwrap();
}

#[test]
fn one_unconfirmed_ancestor_and_small_children() {
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 10_000_000), coins.add(2, 10_000_000));
    let pool = pool();
    let too_big = v3(spend(&[a], &outputs(330, 10_000)));
    assert!(vsize(&too_big) > 10_000);
    assert_eq!(
        truc_reason(accept(&pool, &coins, &too_big)),
        "truc-vsize-toobig"
    );
    let parent = v3(spend(&[a], &[3_000_000, 3_000_000, 3_000_000]));
    accept(&pool, &coins, &parent).unwrap();
    let big_child = v3(spend(&[out(&parent, 0)], &outputs(35, 80_000)));
    assert!(vsize(&big_child) > 1_000);
    assert_eq!(
        truc_reason(accept(&pool, &coins, &big_child)),
        "truc-child-toobig"
    );
    let child = v3(spend(&[out(&parent, 0)], &[2_999_000]));
    accept(&pool, &coins, &child).unwrap();
    let grandchild = v3(spend(&[out(&child, 0)], &[2_998_000]));
    assert_eq!(
        truc_reason(accept(&pool, &coins, &grandchild)),
        "truc-ancestors-toomany"
    );
    // Two unconfirmed parents are two ancestors.
    let other = v3(spend(&[b], &[9_999_000]));
    accept(&pool, &coins, &other).unwrap();
    let two_parents = v3(spend(&[out(&parent, 1), out(&other, 0)], &[12_000_000]));
    assert_eq!(
        truc_reason(accept(&pool, &coins, &two_parents)),
        "truc-ancestors-toomany"
    );
}

#[test]
fn a_second_child_evicts_the_first_if_it_pays_for_the_replacement() {
    let mut coins = Coins::new();
    let a = coins.add(1, 10_000_000);
    let pool = pool();
    let parent = v3(spend(&[a], &[3_000_000, 3_000_000]));
    accept(&pool, &coins, &parent).unwrap();
    let first = v3(spend(&[out(&parent, 0)], &[2_999_000]));
    accept(&pool, &coins, &first).unwrap();
    // A sibling paying no more than the first is refused as a replacement would be.
    let cheap = v3(spend(&[out(&parent, 1)], &[2_999_000]));
    let refused = accept(&pool, &coins, &cheap);
    assert!(
        matches!(refused, Err(Rejection::Replacement { .. })),
        "{refused:?}"
    );
    // A dry run of a package may not evict.
    let raws = vec![serialize(&cheap)];
    let alone = pool.test_accept_from(&raws, &coins).unwrap();
    assert!(matches!(
        alone[0].verdict,
        Some(Err(Rejection::Replacement { .. }))
    ));
    let richer = v3(spend(&[out(&parent, 1)], &[2_990_000]));
    let accepted = accept(&pool, &coins, &richer).unwrap();
    assert_eq!(accepted.replaced, vec![first.compute_txid()]);
    assert!(has(&pool, &richer) && !has(&pool, &first));
}

#[test]
fn a_package_is_held_to_truc_as_a_whole() {
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 10_000_000), coins.add(2, 100_000));
    let pool = pool();
    let parent = v3(spend(&[a], &[3_000_000, 3_000_000]));
    let child = v3(spend(&[out(&parent, 0)], &[2_999_000]));
    let sibling = v3(spend(&[out(&parent, 1)], &[2_999_000]));
    let grandchild = v3(spend(&[out(&child, 0)], &[2_998_000]));
    let plain_child = spend(&[out(&parent, 1)], &[2_999_000]);
    let plain = spend(&[b], &[99_000]);
    let plain_parent_of_truc = v3(spend(&[out(&plain, 0)], &[98_000]));
    let error = |txs: &[&Transaction]| {
        let raws: Vec<Vec<u8>> = txs.iter().map(|t| serialize(*t)).collect();
        let results = pool.test_accept_from(&raws, &coins).unwrap();
        let error = results[0].package_error.clone();
        assert!(results.iter().all(|r| r.package_error == error));
        error.map(|e| e.split(',').next().unwrap_or_default().to_string())
    };
    assert_eq!(error(&[&parent, &child]), None);
    assert_eq!(
        error(&[&parent, &child, &sibling]).as_deref(),
        Some("truc-sibling-known")
    );
    assert_eq!(
        error(&[&parent, &child, &grandchild]).as_deref(),
        Some("truc-parent-and-child-both")
    );
    assert_eq!(
        error(&[&parent, &plain_child]).as_deref(),
        Some("truc-spent-by-nontruc")
    );
    assert_eq!(
        error(&[&plain, &plain_parent_of_truc]).as_deref(),
        Some("truc-spends-nontruc")
    );
    // A parent in the mempool with a child already: a package child is one too many, and
    // may not evict it (Core's `SingleTRUCChecks` refuses it before the package's checks).
    accept(&pool, &coins, &parent).unwrap();
    accept(&pool, &coins, &child).unwrap();
    let raws = vec![serialize(&plain), serialize(&sibling)];
    let results = pool.test_accept_from(&raws, &coins).unwrap();
    assert!(results[0].verdict.is_none() && results[0].package_error.is_none());
    assert!(matches!(
        results[1].verdict,
        Some(Err(Rejection::Truc {
            reason: "truc-descendants-toomany",
            ..
        }))
    ));
}

#[test]
fn by_default_version_3_is_any_version_and_reject_refuses_it() {
    let mut coins = Coins::new();
    let a = coins.add(1, 100_000);
    let accepting = super::pool();
    let parent = v3(spend(&[a], &[99_000]));
    accept(&accepting, &coins, &parent).unwrap();
    let child = spend(&[out(&parent, 0)], &[98_000]);
    accept(&accepting, &coins, &child).unwrap();
    let config = MempoolConfig {
        persist: false,
        truc: TrucPolicy::Reject,
        ..MempoolConfig::knots()
    };
    let rejecting = Mempool::with_script_check(config, all_scripts_valid);
    let refused = accept(&rejecting, &coins, &parent);
    assert_eq!(refused.unwrap_err().to_string(), "version");
}
