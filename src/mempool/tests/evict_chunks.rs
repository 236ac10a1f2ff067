//! Core 31's eviction: the worst chunk of any cluster leaves, the rolling floor rises to its
//! rate, and the chunk index follows every entry, replacement, confirmation and eviction.

use proptest::prelude::*;

use super::*;

/// A pool of Core's defaults holding at most `max_bytes`, taking every script as valid.
fn core_pool_of(max_bytes: u64) -> Mempool {
    let config = MempoolConfig {
        max_bytes,
        persist: false,
        ..MempoolConfig::default()
    };
    Mempool::with_script_check(config, all_scripts_valid)
}

/// [`usage_of`] in Core's profile, that of [`core_pool_of`].
fn core_usage(coins: &Coins, txs: &[&Transaction]) -> u64 {
    usage_of(MempoolConfig::default(), coins, txs)
}

/// Whether `a / b` is under `c / d`, exactly.
fn rate_below(a: u64, b: u64, c: u64, d: u64) -> bool {
    u128::from(a) * u128::from(d) < u128::from(c) * u128::from(b)
}

#[test]
fn the_worst_chunk_leaves_where_descendant_scores_would_keep_it() {
    let mut coins = Coins::new();
    let [a, b, x] = [1, 2, 3].map(|n| coins.add(n, 100_000));
    // Two parents at 1 sat/vB and a child of both at 4: one chunk at about 2.3 sat/vB, while
    // each parent's descendant score (itself and the child) is about 2.8.
    let p1 = spend(&[a], &[100_000 - 82]);
    let p2 = spend(&[b], &[100_000 - 82]);
    let shape = spend(&[out(&p1, 0), out(&p2, 0)], &[1]);
    let fc = 4 * vsize(&shape);
    let child = spend(&[out(&p1, 0), out(&p2, 0)], &[2 * (100_000 - 82) - fc]);
    let (chunk_fee, chunk_vsize) = (82 + 82 + fc, vsize(&p1) + vsize(&p2) + vsize(&child));
    // A stranger at 2.5 sat/vB: above the chunk, under the parents' scores.
    let stranger = spend(&[x], &[100_000 - 205]);
    let (xf, xv) = (205, vsize(&stranger));
    assert!(rate_below(chunk_fee, chunk_vsize, xf, xv));
    assert!(rate_below(xf, xv, 82 + fc, vsize(&p1) + vsize(&child)));
    let all = [&p1, &p2, &child, &stranger];
    let core = core_pool_of(core_usage(&coins, &all) - 1);
    for tx in [&p1, &p2, &child, &stranger] {
        accept(&core, &coins, tx).unwrap();
    }
    assert!(has(&core, &stranger));
    assert!(!has(&core, &p1) && !has(&core, &p2) && !has(&core, &child));
    // Core's TrimToSize: the chunk's rate plus the incremental relay fee, 0.1 sat/vB.
    assert_eq!(core.min_fee_per_kvb(), chunk_fee * 1000 / chunk_vsize + 100);
    core.write().assert_chunks_fresh();

    // Knots's profile evicts by descendant score: the stranger is the lowest.
    let knots = pool_of(knots_usage(&coins, &all) - 1);
    for tx in [&p1, &p2, &child] {
        accept(&knots, &coins, tx).unwrap();
    }
    assert_eq!(
        accept(&knots, &coins, &stranger).unwrap_err(),
        Rejection::MempoolFull
    );
    assert!(has(&knots, &p1) && has(&knots, &p2) && has(&knots, &child));
}

#[test]
fn a_parent_its_child_pays_for_leaves_only_with_the_child() {
    let mut coins = Coins::new();
    let [a, b, c] = [1, 2, 3].map(|n| coins.add(n, 100_000));
    // 1 sat/vB alone, about 45 in one chunk with its child; the other pays 9.
    let parent = spend(&[a], &[99_890]);
    let child = spend(&[out(&parent, 0)], &[90_000]);
    let middling = spend(&[b], &[99_000]);
    let newcomer = spend(&[c], &[98_000]);
    let limit = core_usage(&coins, &[&parent, &child, &middling, &newcomer]) - 1;
    let pool = core_pool_of(limit);
    for tx in [&parent, &child, &middling, &newcomer] {
        accept(&pool, &coins, tx).unwrap();
    }
    assert!(has(&pool, &parent) && has(&pool, &child) && has(&pool, &newcomer));
    assert!(!has(&pool, &middling));
    assert_eq!(
        pool.min_fee_per_kvb(),
        1_000 * 1000 / vsize(&middling) + 100
    );
    pool.write().assert_chunks_fresh();
}

#[test]
fn of_equal_chunks_the_higher_txid_leaves_first() {
    let mut coins = Coins::new();
    let [a, b, c] = [1, 2, 3].map(|n| coins.add(n, 100_000));
    let one = spend(&[a], &[99_800]);
    let two = spend(&[b], &[99_800]);
    let better = spend(&[c], &[99_000]);
    let pool = core_pool_of(core_usage(&coins, &[&one, &two, &better]) - 1);
    for tx in [&one, &two, &better] {
        accept(&pool, &coins, tx).unwrap();
    }
    let (low, high) = match one.compute_txid() < two.compute_txid() {
        true => (&one, &two),
        false => (&two, &one),
    };
    assert!(has(&pool, low) && !has(&pool, high) && has(&pool, &better));
}

/// One change to a pool in [`the_chunk_index_follows_every_change`].
#[derive(Debug, Clone)]
enum Step {
    /// A payment from up to three spendable outputs (chosen by index) into `outputs` outputs.
    Pay {
        from: Vec<usize>,
        fee: u64,
        outputs: usize,
    },
    /// A replacement of a pool transaction's first input, paying `fee`.
    Replace { of: usize, fee: u64 },
    /// A block confirming a pool transaction whose inputs are all confirmed.
    Confirm { of: usize },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (proptest::collection::vec(0usize..64, 1..4), 0u64..6_000, 1usize..4)
            .prop_map(|(from, fee, outputs)| Step::Pay { from, fee, outputs }),
        2 => (0usize..64, 0u64..20_000).prop_map(|(of, fee)| Step::Replace { of, fee }),
        1 => (0usize..64).prop_map(|of| Step::Confirm { of }),
    ]
}

/// The pool, the coins and what may be spent next.
struct World {
    pool: Mempool,
    coins: Coins,
    spendable: Vec<(OutPoint, u64)>,
    sent: Vec<Transaction>,
}

impl World {
    fn new(max_bytes: u64) -> World {
        let mut coins = Coins::new();
        let spendable = (1..=8)
            .map(|n| (coins.add(n, 1_000_000), 1_000_000))
            .collect();
        World {
            pool: core_pool_of(max_bytes),
            coins,
            spendable,
            sent: Vec::new(),
        }
    }

    fn run(&mut self, step: &Step) {
        match step {
            Step::Pay { from, fee, outputs } => self.pay(from, *fee, *outputs),
            Step::Replace { of, fee } => self.replace(*of, *fee),
            Step::Confirm { of } => self.confirm(*of),
        }
    }

    fn pay(&mut self, from: &[usize], fee: u64, outputs: usize) {
        let mut picked: Vec<usize> = from.iter().map(|i| i % self.spendable.len()).collect();
        picked.sort_unstable();
        picked.dedup();
        let inputs: Vec<OutPoint> = picked.iter().map(|&i| self.spendable[i].0).collect();
        let value: u64 = picked.iter().map(|&i| self.spendable[i].1).sum();
        let each = value.saturating_sub(fee) / outputs as u64;
        if each < 1_000 {
            return;
        }
        let tx = spend(&inputs, &vec![each; outputs]);
        self.send(tx, Some(picked));
    }

    fn replace(&mut self, of: usize, fee: u64) {
        let in_pool: Vec<Transaction> = (self.sent.iter())
            .filter(|t| has(&self.pool, t))
            .cloned()
            .collect();
        let Some(old) = in_pool.get(of % in_pool.len().max(1)) else {
            return;
        };
        let first = old.input[0].previous_output;
        let value = self.value_of(&first);
        if value < fee + 1_000 {
            return;
        }
        self.send(spend(&[first], &[value - fee]), None);
    }

    fn confirm(&mut self, of: usize) {
        let ready: Vec<Transaction> = (self.sent.iter())
            .filter(|t| has(&self.pool, t))
            .filter(|t| {
                (t.input.iter()).all(|i| self.coins.unspent.contains_key(&i.previous_output))
            })
            .cloned()
            .collect();
        if let Some(tx) = ready.get(of % ready.len().max(1)) {
            self.coins.confirm(tx);
            self.pool.revalidate_from(&self.coins);
        }
    }

    /// The value of an output this world made or was given.
    fn value_of(&self, op: &OutPoint) -> u64 {
        let made = (self.sent.iter())
            .find(|t| t.compute_txid() == op.txid)
            .and_then(|t| t.output.get(op.vout as usize))
            .map(|o| o.value.to_sat());
        made.unwrap_or(1_000_000)
    }

    fn send(&mut self, tx: Transaction, picked: Option<Vec<usize>>) {
        if accept(&self.pool, &self.coins, &tx).is_err() {
            return;
        }
        if let Some(picked) = picked {
            for i in picked.into_iter().rev() {
                self.spendable.swap_remove(i);
            }
        }
        let txid = tx.compute_txid();
        for (vout, o) in tx.output.iter().enumerate() {
            self.spendable
                .push((OutPoint::new(txid, vout as u32), o.value.to_sat()));
        }
        self.sent.push(tx);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Whatever enters, is replaced, confirmed or evicted, the index holds exactly the chunks
    /// a fresh linearization of every cluster gives, and the pool stays under its limit.
    #[test]
    fn the_chunk_index_follows_every_change(
        steps in proptest::collection::vec(step(), 1..60),
        max_bytes in 3_000u64..15_000,
    ) {
        let mut world = World::new(max_bytes);
        for step in &steps {
            world.run(step);
            world.pool.write().assert_chunks_fresh();
            prop_assert!(world.pool.memory_usage().0 <= max_bytes);
        }
    }
}
