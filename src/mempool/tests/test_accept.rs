//! Dry runs ([`Mempool::test_accept`]): bitcoind's `testmempoolaccept` for one transaction and
//! for a package, nothing kept.

use super::*;

/// The dry run of `txs`, as (allowed, reason) per transaction: `None` when undecided.
fn dry(pool: &Mempool, coins: &Coins, txs: &[&Transaction]) -> Vec<TestAccept> {
    let raws: Vec<Vec<u8>> = txs.iter().map(|t| serialize(*t)).collect();
    pool.test_accept_from(&raws, coins).unwrap()
}

fn allowed(result: &TestAccept) -> Option<bool> {
    result.verdict.as_ref().map(Result::is_ok)
}

fn refusal(result: &TestAccept) -> String {
    match &result.verdict {
        Some(Err(e)) => e.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn one_transaction_is_judged_as_a_broadcast_and_nothing_is_kept() {
    let mut coins = Coins::new();
    let coin = coins.add(1, 100_000);
    let pool = pool();
    let tx = spend(&[coin], &[99_000]);
    let results = dry(&pool, &coins, &[&tx]);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].txid, tx.compute_txid());
    assert_eq!(results[0].wtxid, tx.compute_wtxid());
    assert_eq!(
        results[0].verdict,
        Some(Ok(Tested {
            fee: 1_000,
            vsize: vsize(&tx)
        }))
    );
    assert_eq!(pool.size(), (0, 0));
    // Once in, a second dry run is refused as a broadcast would be.
    accept(&pool, &coins, &tx).unwrap();
    assert_eq!(
        refusal(&dry(&pool, &coins, &[&tx])[0]),
        "txn-already-in-mempool"
    );
    // A replacement paying enough is allowed, and replaces nothing.
    let better = spend(&[coin], &[90_000]);
    assert_eq!(allowed(&dry(&pool, &coins, &[&better])[0]), Some(true));
    let worse = spend(&[coin], &[98_999]);
    assert!(refusal(&dry(&pool, &coins, &[&worse])[0]).starts_with("insufficient fee"));
    assert_eq!(pool.txids(), vec![tx.compute_txid()]);
}

#[test]
fn a_package_spends_its_earlier_members_and_each_pays_its_own_way() {
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 100_000), coins.add(2, 100_000));
    let pool = pool();
    let parent = spend(&[a], &[99_000]);
    let child = spend(&[out(&parent, 0)], &[98_000]);
    let results = dry(&pool, &coins, &[&parent, &child]);
    assert_eq!(
        results.iter().map(allowed).collect::<Vec<_>>(),
        [Some(true); 2]
    );
    assert!(results.iter().all(|r| r.package_error.is_none()));
    assert_eq!(pool.size(), (0, 0));
    // Alone, the child spends nothing known.
    assert!(
        refusal(&dry(&pool, &coins, &[&child])[0]).starts_with("bad-txns-inputs-missingorspent")
    );
    // No CPFP in a dry run: a parent below the relay fee is refused, the child not reached,
    // and a member that passed before is left undecided, as bitcoind's early exit.
    let other = spend(&[b], &[99_000]);
    let free = spend(&[a], &[100_000]);
    let its_child = spend(&[out(&free, 0)], &[90_000]);
    let results = dry(&pool, &coins, &[&other, &free, &its_child]);
    assert_eq!(allowed(&results[0]), None);
    assert!(refusal(&results[1]).starts_with("min relay fee not met"));
    assert_eq!(allowed(&results[2]), None);
}

#[test]
fn a_package_may_not_replace() {
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 100_000), coins.add(2, 100_000));
    let pool = pool();
    accept(&pool, &coins, &spend(&[a], &[99_000])).unwrap();
    let unrelated = spend(&[b], &[99_000]);
    let replacing = spend(&[a], &[50_000]);
    let results = dry(&pool, &coins, &[&unrelated, &replacing]);
    assert_eq!(allowed(&results[0]), None);
    assert_eq!(refusal(&results[1]), "bip125-replacement-disallowed");
    // Alone, the same transaction may replace.
    assert_eq!(allowed(&dry(&pool, &coins, &[&replacing])[0]), Some(true));
}

#[test]
fn a_malformed_package_is_refused_as_a_whole() {
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 100_000), coins.add(2, 100_000));
    let pool = pool();
    let parent = spend(&[a], &[99_000]);
    let child = spend(&[out(&parent, 0)], &[98_000]);
    let twin = spend(&[a], &[98_000]);
    let stranger = spend(&[b], &[99_000]);
    let cases: [(&[&Transaction], &str); 3] = [
        (&[&child, &parent], "package-not-sorted"),
        (&[&parent, &parent], "package-contains-duplicates"),
        (&[&parent, &twin], "conflict-in-package"),
    ];
    for (txs, error) in cases {
        let results = dry(&pool, &coins, txs);
        for r in &results {
            assert_eq!(r.package_error.as_deref(), Some(error), "{txs:?}");
            assert_eq!(allowed(r), None);
        }
    }
    // Unrelated transactions are a package too (bitcoind's dry run asks no child).
    let results = dry(&pool, &coins, &[&parent, &stranger]);
    assert_eq!(
        results.iter().map(allowed).collect::<Vec<_>>(),
        [Some(true); 2]
    );
}

#[test]
fn a_package_is_held_to_the_chain_limits_as_a_whole() {
    let mut coins = Coins::new();
    let coin = coins.add(1, 10_000_000);
    let pool = pool();
    // 23 in a chain: a package of two more makes 25 with the ancestors, a third 26.
    let mut tip = coin;
    let mut value = 10_000_000;
    for _ in 0..23 {
        value -= 1_000;
        let next = spend(&[tip], &[value]);
        accept(&pool, &coins, &next).unwrap();
        tip = out(&next, 0);
    }
    let first = spend(&[tip], &[value - 1_000]);
    let second = spend(&[out(&first, 0)], &[value - 2_000]);
    let third = spend(&[out(&second, 0)], &[value - 3_000]);
    let results = dry(&pool, &coins, &[&first, &second]);
    assert_eq!(
        results.iter().map(allowed).collect::<Vec<_>>(),
        [Some(true); 2]
    );
    let results = dry(&pool, &coins, &[&first, &second, &third]);
    let error = results[0].package_error.as_deref().unwrap_or("");
    assert!(error.starts_with("package-mempool-limits, "), "{error}");
    assert!(results.iter().all(|r| r.verdict.is_none()));
}

#[test]
fn a_fee_over_the_guard_is_refused_and_ends_the_run() {
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 10_000_000), coins.add(2, 100_000));
    let pool = pool();
    // 10,000 sat/vB at most: this pays 9,000,000 for about 80 vbytes.
    let lavish = spend(&[a], &[1_000_000]);
    let max = MAX_TEST_FEE_PER_KVB * vsize(&lavish) / 1000;
    assert!(9_000_000 > max);
    let fine = spend(&[b], &[99_000]);
    let results = dry(&pool, &coins, &[&lavish, &fine]);
    assert_eq!(
        results[0].verdict,
        Some(Err(Rejection::MaxFeeExceeded {
            fee: 9_000_000,
            max
        }))
    );
    assert_eq!(allowed(&results[1]), None);
    let results = dry(&pool, &coins, &[&fine, &lavish]);
    assert_eq!(allowed(&results[0]), Some(true));
    assert_eq!(allowed(&results[1]), Some(false));
}
