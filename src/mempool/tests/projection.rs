//! The projected blocks as the mempool serves them: from its entries' sizes, sigops and
//! parents, shared until the mempool changes, and not rebuilt more often than ten times their
//! own cost.

use std::time::{Duration, Instant};

use super::*;

#[test]
fn the_projection_reads_packages_and_is_shared_until_the_mempool_changes() {
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 100_000), coins.add(2, 100_000));
    let pool = pool();
    // A 1 sat/vB parent, and a child that brings the package above the other's 5 sat/vB.
    let parent = spend(&[a], &[99_800]);
    accept(&pool, &coins, &parent).unwrap();
    let other = spend(&[b], &[99_000]);
    accept(&pool, &coins, &other).unwrap();
    let first = pool.fee_rates();
    assert_eq!(first.blocks[0].txids[0], other.compute_txid());
    let child = spend(&[out(&parent, 0)], &[97_000]);
    accept(&pool, &coins, &child).unwrap();
    // Projected again (at once unless the first projection took 1 ms or more, which a busy
    // machine can make it: then within ten times that).
    let deadline = Instant::now() + Duration::from_secs(1);
    let second = loop {
        let rates = pool.fee_rates();
        if rates.generation == pool.read().generation || Instant::now() > deadline {
            break rates;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(!Arc::ptr_eq(&first, &second), "a change is projected again");
    let order = &second.blocks[0].txids;
    assert_eq!(
        order[..],
        [
            parent.compute_txid(),
            child.compute_txid(),
            other.compute_txid()
        ]
    );
    let entry = pool.entry(&child.compute_txid()).unwrap();
    assert_eq!(entry.weight, child.weight().to_wu());
    assert!(entry.sigop_cost > 0, "a P2WPKH input counts one sigop");
    assert!(Arc::ptr_eq(&second, &pool.fee_rates()), "unchanged: shared");
}

#[test]
fn a_changed_mempool_is_not_projected_again_within_ten_times_the_last_cost() {
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 100_000), coins.add(2, 100_000));
    let pool = pool();
    accept(&pool, &coins, &spend(&[a], &[99_000])).unwrap();
    let cheap = pool.fee_rates();
    // As if that projection had taken a minute: for ten minutes it serves.
    let slow = Arc::new(fees::FeeRates {
        built: Instant::now(),
        cost: Duration::from_secs(60),
        blocks: cheap.blocks.clone(),
        histogram: cheap.histogram.clone(),
        generation: cheap.generation,
    });
    *pool.fees.lock().unwrap() = Some(slow.clone());
    accept(&pool, &coins, &spend(&[b], &[99_000])).unwrap();
    assert!(Arc::ptr_eq(&slow, &pool.fee_rates()), "the last one serves");
    // One whose cost has passed ten times over is replaced.
    let stale = Arc::new(fees::FeeRates {
        built: Instant::now() - Duration::from_secs(1),
        cost: Duration::from_millis(50),
        blocks: slow.blocks.clone(),
        histogram: slow.histogram.clone(),
        generation: slow.generation,
    });
    *pool.fees.lock().unwrap() = Some(stale.clone());
    let fresh = pool.fee_rates();
    assert!(!Arc::ptr_eq(&stale, &fresh));
    assert_eq!(fresh.blocks[0].txids.len(), 2);
}
