//! Eviction by descendant score: a parent its child pays for stays, the totals follow every
//! entry and exit.

use super::*;

/// Every transaction's totals as a fresh walk of its descendants finds them.
fn assert_totals_fresh(pool: &Mempool) {
    let inner = pool.read();
    for txid in inner.txs.keys() {
        let (fee, vsize) = inner
            .descendants(txid)
            .iter()
            .filter_map(|d| inner.txs.get(d))
            .fold((0, 0), |(f, v), e| (f + e.fee, v + e.vsize));
        let kept = inner.with_descendants[txid];
        assert_eq!((kept.fee, kept.vsize), (fee, vsize), "{txid}");
    }
    assert_eq!(inner.by_score.len(), inner.txs.len());
    assert_eq!(inner.with_descendants.len(), inner.txs.len());
}

#[test]
fn a_parent_its_child_pays_for_is_not_evicted_for_its_own_rate() {
    let mut coins = Coins::new();
    let (a, b, c) = (
        coins.add(1, 100_000),
        coins.add(2, 100_000),
        coins.add(3, 100_000),
    );
    // 1 sat/vB alone, about 45 with its child; the other pays 9.
    let parent = spend(&[a], &[99_890]);
    let child = spend(&[out(&parent, 0)], &[90_000]);
    let middling = spend(&[b], &[99_000]);
    let newcomer = spend(&[c], &[98_000]);
    let limit = knots_usage(&coins, &[&parent, &child, &middling, &newcomer]) - 1;
    let pool = pool_of(limit);
    for tx in [&parent, &child, &middling] {
        accept(&pool, &coins, tx).unwrap();
    }
    assert_totals_fresh(&pool);
    accept(&pool, &coins, &newcomer).unwrap();
    assert!(has(&pool, &parent) && has(&pool, &child) && has(&pool, &newcomer));
    assert!(
        !has(&pool, &middling),
        "the lowest score leaves, not the lowest own rate"
    );
    assert_eq!(
        pool.min_fee_per_kvb(),
        1_000 * 1000 / vsize(&middling) + 1000
    );
    assert_totals_fresh(&pool);
}

#[test]
fn totals_follow_replacements_blocks_and_removals_in_a_diamond() {
    let mut coins = Coins::new();
    let a = coins.add(1, 1_000_000);
    let pool = pool();
    let root = spend(&[a], &[300_000, 300_000, 300_000]);
    let left = spend(&[out(&root, 0)], &[299_000]);
    let right = spend(&[out(&root, 1)], &[299_000]);
    let both = spend(&[out(&left, 0), out(&right, 0)], &[590_000]);
    for tx in [&root, &left, &right, &both] {
        accept(&pool, &coins, tx).unwrap();
    }
    assert_totals_fresh(&pool);
    let root_totals = pool.read().with_descendants[&root.compute_txid()];
    assert_eq!(root_totals.fee, 100_000 + 1_000 + 1_000 + 8_000);
    // Replacing the left branch takes the diamond's bottom with it.
    let new_left = spend(&[out(&root, 0)], &[280_000]);
    accept(&pool, &coins, &new_left).unwrap();
    assert!(!has(&pool, &both));
    assert_totals_fresh(&pool);
    // A block confirms the root: its children stay, with their own totals.
    coins.confirm(&root);
    pool.revalidate_from(&coins);
    assert_eq!(pool.size().0, 2);
    assert_totals_fresh(&pool);
}

#[test]
fn a_refused_package_evicts_nobody() {
    let mut coins = Coins::new();
    let [a, b, c, p] = [1, 2, 3, 4].map(|n| coins.add(n, 100_000));
    let vs = vsize(&spend(&[a], &[1]));
    assert_eq!(vs, 82);
    // 2, 2.5 and 10 sat/vB: the third evicts the first, and the floor is 3 sat/vB.
    let three = [(a, 164), (b, 205), (c, 820)].map(|(coin, fee)| spend(&[coin], &[100_000 - fee]));
    let pool = pool_of(knots_usage(&coins, &[&three[0], &three[1], &three[2]]) - 1);
    for tx in &three {
        let _ = accept(&pool, &coins, tx);
    }
    assert_eq!(pool.size().0, 2);
    assert_eq!(pool.min_fee_per_kvb(), 3_000);
    // A parent at 2.8 sat/vB (under the floor, above the 2.5 in the pool) and a child that
    // spends more than it has: refused before anything enters, so the 2.5 stays.
    let parent = spend(&[p], &[100_000 - 230]);
    let child = spend(&[out(&parent, 0)], &[200_000]);
    let raws = vec![serialize(&parent), serialize(&child)];
    let package = pool.accept_package_from(&raws, &coins).unwrap();
    assert_eq!(
        package.each[0].as_ref().unwrap_err(),
        &Rejection::PackageFailed(child.compute_txid())
    );
    assert!(matches!(package.each[1], Err(Rejection::InBelowOut { .. })));
    assert!(package.touched.is_empty());
    assert_eq!(pool.size().0, 2, "nobody evicted");
    assert_totals_fresh(&pool);
}

#[test]
fn what_a_refused_newcomer_evicted_is_announced_with_the_next_change() {
    let mut coins = Coins::new();
    let (a, b, n, d) = (
        coins.add(1, 100_000),
        coins.add(2, 100_000),
        coins.add(3, 100_000),
        coins.add(4, 100_000),
    );
    // About 2 and 10 sat/vB; the newcomer is large at about 5 sat/vB.
    let low = spend(&[a], &[99_780]);
    let high = spend(&[b], &[98_900]);
    let shape = spend(&[n], &[1_000; 30]);
    let fee = 5 * vsize(&shape);
    let newcomer = spend(
        &[n],
        &[vec![1_000; 29], vec![100_000 - 29_000 - fee]].concat(),
    );
    assert_eq!(vsize(&newcomer), vsize(&shape));
    // With it, the pool is over by more than the cheapest holds: the eviction pass takes the
    // cheapest, then the newcomer itself.
    let (kept, crowded) = (
        knots_usage(&coins, &[&low, &high]),
        knots_usage(&coins, &[&high, &newcomer]),
    );
    assert!(kept < crowded);
    let pool = pool_of((kept + crowded) / 2);
    accept(&pool, &coins, &low).unwrap();
    accept(&pool, &coins, &high).unwrap();
    assert_eq!(
        accept(&pool, &coins, &newcomer).unwrap_err(),
        Rejection::MempoolFull
    );
    assert!(!has(&pool, &low) && !has(&pool, &newcomer) && has(&pool, &high));
    // The evicted one's scripts come with the next acceptance (they were lost before).
    let next = spend(&[d], &[98_000]);
    let accepted = accept(&pool, &coins, &next).unwrap();
    assert!(accepted.touched.contains(&ScriptHash::of(&script(1))));
    let again = pool.revalidate_from(&coins);
    assert!(
        !again.contains(&ScriptHash::of(&script(1))),
        "handed out once"
    );
}
