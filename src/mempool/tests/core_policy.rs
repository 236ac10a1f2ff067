//! Core 31's profile, the default: clusters instead of chain limits, the fee-rate diagram for
//! replacements, ephemeral dust, BIP54's legacy sigops, TRUC in Core's words.

use super::*;

/// A pool of Core's defaults that takes every script as valid.
fn core_pool() -> Mempool {
    let config = MempoolConfig {
        persist: false,
        ..MempoolConfig::default()
    };
    Mempool::with_script_check(config, all_scripts_valid)
}

/// A chain of `n` transactions from `coin` (worth `value`), each paying 200 satoshis of fee;
/// each one's single output is the next one's input.
fn chain(coin: OutPoint, value: u64, n: usize) -> Vec<Transaction> {
    let mut txs = Vec::with_capacity(n);
    let (mut from, mut left) = (coin, value);
    for _ in 0..n {
        left -= 200;
        let tx = spend(&[from], &[left]);
        from = OutPoint::new(tx.compute_txid(), 0);
        txs.push(tx);
    }
    txs
}

#[test]
fn clusters_of_64_enter_and_the_65th_is_refused() {
    let mut coins = Coins::new();
    let coin = coins.add(1, 1_000_000);
    let pool = core_pool();
    let txs = chain(coin, 1_000_000, 65);
    // Knots's 25 ancestors do not apply: the 26th to the 64th enter.
    for tx in &txs[..64] {
        accept(&pool, &coins, tx).unwrap();
    }
    assert_eq!(
        accept(&pool, &coins, &txs[64]).unwrap_err(),
        Rejection::TooLargeCluster
    );
    assert_eq!(Rejection::TooLargeCluster.to_string(), "too-large-cluster");
    // Knots's profile stops the same chain at 25.
    let knots = pool_of(MempoolConfig::knots().max_bytes);
    for tx in &txs[..25] {
        accept(&knots, &coins, tx).unwrap();
    }
    assert!(matches!(
        accept(&knots, &coins, &txs[25]),
        Err(Rejection::TooLongChain(_))
    ));
}

#[test]
fn a_transaction_joining_two_clusters_counts_both() {
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 1_000_000), coins.add(2, 1_000_000));
    let pool = core_pool();
    let left = chain(a, 1_000_000, 32);
    let right = chain(b, 1_000_000, 32);
    for tx in left.iter().chain(&right) {
        accept(&pool, &coins, tx).unwrap();
    }
    let tip = |txs: &[Transaction]| OutPoint::new(txs[31].compute_txid(), 0);
    let left_value = left[31].output[0].value.to_sat();
    let right_value = right[31].output[0].value.to_sat();
    // 32 + 32 + itself: 65.
    let joining = spend(
        &[tip(&left), tip(&right)],
        &[left_value + right_value - 1_000],
    );
    assert_eq!(
        accept(&pool, &coins, &joining).unwrap_err(),
        Rejection::TooLargeCluster
    );
}

#[test]
fn the_cluster_size_limit_counts_adjusted_weight() {
    let mut coins = Coins::new();
    let coin = coins.add(1, 10_000_000);
    let pool = core_pool();
    // A parent of 1,500 outputs (about 186,000 weight units) and a child spending 700 of them
    // (about 115,000): under 404,000 together; a second such child passes it.
    let parent = spend(&[coin], &[5_000; 1_500]);
    accept(&pool, &coins, &parent).unwrap();
    let ptxid = parent.compute_txid();
    let ops = |range: std::ops::Range<u32>| -> Vec<OutPoint> {
        range.map(|v| OutPoint::new(ptxid, v)).collect()
    };
    let first = spend(&ops(0..700), &[5_000 * 700 - 10_000]);
    accept(&pool, &coins, &first).unwrap();
    let weight: u64 = [&parent, &first].iter().map(|t| t.weight().to_wu()).sum();
    let second = spend(&ops(700..1_400), &[5_000 * 700 - 10_000]);
    let total = weight + second.weight().to_wu();
    assert!(total > 404_000 && weight < 404_000, "{weight} {total}");
    assert_eq!(
        accept(&pool, &coins, &second).unwrap_err(),
        Rejection::TooLargeCluster
    );
}

#[test]
fn replacements_are_judged_by_the_fee_rate_diagram() {
    let mut coins = Coins::new();
    let coin = coins.add(1, 100_000);
    let pool = core_pool();
    let original = spend(&[coin], &[90_000]);
    accept(&pool, &coins, &original).unwrap();
    // More fee and the same size: a better diagram.
    let better = spend(&[coin], &[89_000]);
    // More fee in all (rules 3 and 4 pass) but so much bigger that its rate falls below the
    // original's: the diagram is worse at the start, so it is no improvement.
    let bigger = spend(&[coin], &[[69_700].as_slice(), &[330; 60]].concat());
    assert_eq!(
        bigger.output.iter().map(|o| o.value.to_sat()).sum::<u64>(),
        89_500
    );
    match accept(&pool, &coins, &bigger) {
        Err(Rejection::ReplacementFailed { .. }) => {}
        other => panic!("expected replacement-failed, got {other:?}"),
    }
    // Less fee than what it replaces: rule 3.
    let cheaper = spend(&[coin], &[95_000]);
    assert!(matches!(
        accept(&pool, &coins, &cheaper),
        Err(Rejection::Replacement { .. })
    ));
    let accepted = accept(&pool, &coins, &better).unwrap();
    assert_eq!(accepted.replaced, vec![original.compute_txid()]);
}

#[test]
fn a_replacements_linearization_is_metered_for_its_caller() {
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 1_000_000), coins.add(2, 1_000_000));
    let pool = core_pool();
    let txs = chain(a, 1_000_000, 64);
    for tx in &txs {
        accept(&pool, &coins, tx).unwrap();
    }
    // A lone payment in a roomy pool linearizes nothing.
    let (lone, work) = linearize::metered(|| accept(&pool, &coins, &spend(&[b], &[999_000])));
    assert!(lone.is_ok());
    assert_eq!(work, 0);
    // Replacing the chain's last transaction judges its 64-transaction cluster's diagram
    // before and after.
    let left = 1_000_000 - 63 * 200;
    let bump = spend(&[OutPoint::new(txs[62].compute_txid(), 0)], &[left - 5_000]);
    let (replaced, work) = linearize::metered(|| accept(&pool, &coins, &bump));
    assert!(replaced.is_ok(), "{replaced:?}");
    assert!(work >= 2 * 64 * 64, "{work}");
}

#[test]
fn a_replacement_may_spend_new_unconfirmed_outputs_and_pay_a_lower_rate_than_its_conflict() {
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 100_000), coins.add(2, 100_000));
    let pool = core_pool();
    let original = spend(&[a], &[99_000]);
    let other = spend_to(&[b], &[99_000], 7);
    accept(&pool, &coins, &original).unwrap();
    accept(&pool, &coins, &other).unwrap();
    // Spends `a` again and `other`'s output (unconfirmed: BIP125 rule 2 and Knots refuse).
    let from_other = OutPoint::new(other.compute_txid(), 0);
    let replacement = spend(&[a, from_other], &[99_000 + 99_000 - 5_000]);
    let knots = pool_of(MempoolConfig::knots().max_bytes);
    accept(&knots, &coins, &original).unwrap();
    accept(&knots, &coins, &other).unwrap();
    assert!(matches!(
        accept(&knots, &coins, &replacement),
        Err(Rejection::AddsUnconfirmed { .. })
    ));
    let accepted = accept(&pool, &coins, &replacement).unwrap();
    assert_eq!(accepted.replaced, vec![original.compute_txid()]);
}

#[test]
fn one_dust_output_needs_a_free_transaction_and_a_child_that_spends_it() {
    let mut coins = Coins::new();
    let coin = coins.add(1, 100_000);
    let pool = core_pool();
    // Two dust outputs: never.
    let two = spend(&[coin], &[90_000, 1, 1]);
    assert_eq!(
        accept(&pool, &coins, &two).unwrap_err(),
        Rejection::NonStandard("dust".into())
    );
    // One, with a fee: refused as Core's `PreCheckEphemeralTx` refuses it.
    let paying = spend(&[coin], &[90_000, 1]);
    assert_eq!(
        accept(&pool, &coins, &paying).unwrap_err().to_string(),
        "dust, tx with dust output must be 0-fee"
    );
    // Knots refuses any dust output at once.
    assert_eq!(
        standard::check_standard(&paying, &MempoolConfig::knots()).unwrap_err(),
        Rejection::NonStandard("dust".into())
    );
    // Free, with its dust: below the relay fee alone (a package's child pays for it). Once in
    // (entered as a block's leftover would), a child must spend the dust.
    let free = spend(&[coin], &[99_999, 1]);
    assert!(matches!(
        accept(&pool, &coins, &free),
        Err(Rejection::MinRelayFee { .. })
    ));
    pool.accept_with(&serialize(&free), &coins, false, persist::now())
        .unwrap();
    let txid = free.compute_txid();
    let skips_dust = spend(&[OutPoint::new(txid, 0)], &[99_000]);
    assert_eq!(
        accept(&pool, &coins, &skips_dust).unwrap_err(),
        Rejection::MissingEphemeralSpends {
            txid: skips_dust.compute_txid()
        }
    );
    let spends_dust = spend(&[OutPoint::new(txid, 0), OutPoint::new(txid, 1)], &[99_000]);
    accept(&pool, &coins, &spends_dust).unwrap();
}

#[test]
fn legacy_sigops_are_limited_to_bip54s_2500() {
    let mut coins = Coins::new();
    let pool = core_pool();
    // Outputs of 2,501 and 2,500 OP_CHECKSIGs: the first breaks BIP54 before its type is asked.
    let mut add = |n: u8, checksigs: usize| {
        let op = coins.add(n, 100_000);
        let entry = coins.unspent.get_mut(&op).unwrap();
        entry.output.script_pubkey = ScriptBuf::from_bytes(vec![0xac; checksigs]);
        op
    };
    let over = add(1, 2_501);
    let at = add(2, 2_500);
    let reason = |r: Result<Accepted, Rejection>| r.unwrap_err().to_string();
    assert_eq!(
        reason(accept(&pool, &coins, &spend(&[over], &[90_000]))),
        "bad-txns-nonstandard-inputs: non-witness sigops exceed bip54 limit"
    );
    assert_eq!(
        reason(accept(&pool, &coins, &spend(&[at], &[90_000]))),
        "bad-txns-nonstandard-inputs: input 0 spends a non-standard output"
    );
    // Knots 29.4 has no such limit: its refusal is the type's (its own 1,650-byte script
    // limit apart).
    let config = MempoolConfig {
        persist: false,
        knots_data_rules: false,
        ..MempoolConfig::knots()
    };
    let knots = Mempool::with_script_check(config, all_scripts_valid);
    assert_eq!(
        reason(accept(&knots, &coins, &spend(&[over], &[90_000]))),
        "bad-txns-nonstandard-inputs: input 0 spends a non-standard output"
    );
}

#[test]
fn truc_refusals_are_cores_truc_violation() {
    let mut coins = Coins::new();
    let coin = coins.add(1, 100_000);
    let pool = core_pool();
    let mut parent = spend(&[coin], &[90_000]);
    parent.version = Version(3);
    accept(&pool, &coins, &parent).unwrap();
    let child = spend(&[OutPoint::new(parent.compute_txid(), 0)], &[80_000]);
    let refusal = accept(&pool, &coins, &child).unwrap_err().to_string();
    assert!(
        refusal.starts_with("TRUC-violation, non-version=3 tx"),
        "{refusal}"
    );
}

#[test]
fn data_carriers_and_bare_outputs_are_cores() {
    let coin = OutPoint::new(Txid::from_byte_array([1; 32]), 0);
    let core = MempoolConfig::default();
    let with_data = |sizes: &[usize]| {
        let mut tx = spend(&[coin], &[100_000]);
        for &size in sizes {
            let mut script = vec![0x6a, 0x4d, (size - 4) as u8, ((size - 4) >> 8) as u8];
            script.resize(size, 0xab);
            tx.output.push(TxOut {
                value: Amount::ZERO,
                script_pubkey: ScriptBuf::from_bytes(script),
            });
        }
        tx
    };
    assert!(standard::check_standard(&with_data(&[200]), &core).is_ok());
    assert!(standard::check_standard(&with_data(&[40, 40]), &core).is_ok());
    assert!(standard::check_standard(&with_data(&[50_000, 49_000]), &core).is_ok());
    // Over the limit together: refused at the output that passes it, before a later bad one.
    let small = MempoolConfig {
        datacarrier_size: 1_000,
        ..MempoolConfig::default()
    };
    assert!(standard::check_standard(&with_data(&[500, 500]), &small).is_ok());
    let mut over = with_data(&[500, 501]);
    over.output.push(TxOut {
        value: Amount::from_sat(1_000),
        script_pubkey: ScriptBuf::from_bytes(vec![0x51]),
    });
    assert_eq!(
        standard::check_standard(&over, &small).unwrap_err(),
        Rejection::NonStandard("datacarrier".into())
    );
    let mut multisig = spend(&[coin], &[100_000]);
    multisig.output[0].script_pubkey = super::multisig(1, 2);
    assert!(standard::check_standard(&multisig, &core).is_ok());
}

#[test]
fn a_packages_unrelated_members_are_counted_in_their_own_clusters() {
    let mut coins = Coins::new();
    let (a, b) = (coins.add(1, 1_000_000), coins.add(2, 1_000_000));
    let pool = core_pool();
    let txs = chain(a, 1_000_000, 63);
    for tx in &txs {
        accept(&pool, &coins, tx).unwrap();
    }
    let left = 1_000_000 - 63 * 200;
    let last = spend(&[OutPoint::new(txs[62].compute_txid(), 0)], &[left - 200]);
    let stranger = spend(&[b], &[999_000]);
    let raws =
        |txs: &[&Transaction]| -> Vec<Vec<u8>> { txs.iter().map(|t| serialize(*t)).collect() };
    // The 64th of the chain and a stranger: two clusters, of 64 and of 1.
    let results = pool
        .test_accept_from(&raws(&[&last, &stranger]), &coins)
        .unwrap();
    assert!(
        results.iter().all(|r| matches!(r.verdict, Some(Ok(_)))),
        "{results:?}"
    );
    // The 64th and a 65th: one cluster over the limit.
    let over = spend(&[OutPoint::new(last.compute_txid(), 0)], &[left - 400]);
    let results = pool.test_accept_from(&raws(&[&last, &over]), &coins);
    assert!(
        matches!(&results, Ok(r) if r.iter().all(|r| r.package_error.as_deref() == Some("too-large-cluster")))
            || matches!(&results, Err(Rejection::TooLargeCluster)),
        "{results:?}"
    );
}

#[test]
fn a_parent_and_its_child_replace_together_as_core_31s_package_rbf() {
    let mut coins = Coins::new();
    let [a, b, c, e, f] = [1, 2, 3, 5, 6].map(|n| coins.add(n, 100_000));
    let pool = core_pool();
    let submit = |txs: &[&Transaction]| {
        let raws: Vec<Vec<u8>> = txs.iter().map(|t| serialize(*t)).collect();
        pool.accept_package_from(&raws, &coins).unwrap()
    };
    // A parent paying less than what it replaces, alone refused; with a child paying for both,
    // taken, and what it replaced gone.
    let old = spend(&[a], &[99_000]);
    accept(&pool, &coins, &old).unwrap();
    let parent = spend(&[a], &[99_500]);
    assert!(matches!(
        accept(&pool, &coins, &parent),
        Err(Rejection::Replacement { .. })
    ));
    let child = spend(&[out(&parent, 0)], &[95_000]);
    let package = submit(&[&parent, &child]);
    assert!(package.each.iter().all(Result::is_ok), "{:?}", package.each);
    assert!(!has(&pool, &old) && has(&pool, &parent) && has(&pool, &child));
    let replaced: Vec<Txid> = (package.each.iter())
        .flat_map(|r| r.as_ref().unwrap().replaced.clone())
        .collect();
    assert_eq!(replaced, vec![old.compute_txid()]);
    // Together short of the fees they replace: refused, the old one stays.
    let old = spend(&[b], &[99_000]);
    accept(&pool, &coins, &old).unwrap();
    let parent = spend(&[b], &[99_500]);
    let child = spend(&[out(&parent, 0)], &[99_100]);
    let package = submit(&[&parent, &child]);
    assert_eq!(
        package.each[1].as_ref().unwrap_err().to_string(),
        "package RBF failed: insufficient anti-DoS fees"
    );
    assert!(has(&pool, &old) && !has(&pool, &parent));
    // A child paying less than its parent's rate: the package must be a chunk of its own.
    let old = spend(&[c], &[99_000]);
    accept(&pool, &coins, &old).unwrap();
    let parent = spend(&[c], &[99_100]);
    let child = spend(&[out(&parent, 0)], &[98_900]);
    let package = submit(&[&parent, &child]);
    assert_eq!(
        package.each[1].as_ref().unwrap_err().to_string(),
        "package RBF failed: package feerate is less than or equal to parent feerate"
    );
    assert!(has(&pool, &old));
    // Two cheap parents (one conflicting, one paying nothing) and their child: not one parent
    // and one child.
    let old = spend(&[e], &[99_000]);
    accept(&pool, &coins, &old).unwrap();
    let first = spend(&[e], &[99_990]);
    let second = spend(&[f], &[100_000]);
    let child = spend(&[out(&first, 0), out(&second, 0)], &[150_000]);
    let package = submit(&[&first, &second, &child]);
    assert_eq!(
        package.each[2].as_ref().unwrap_err().to_string(),
        "package RBF failed: package must be 1-parent-1-child"
    );
    assert!(has(&pool, &old));
    // Knots's profile takes no package replacement.
    let knots = pool_of(MempoolConfig::knots().max_bytes);
    let mut coins = Coins::new();
    let d = coins.add(4, 100_000);
    let old = spend(&[d], &[99_000]);
    accept(&knots, &coins, &old).unwrap();
    let parent = spend(&[d], &[99_500]);
    let child = spend(&[out(&parent, 0)], &[95_000]);
    let raws = vec![serialize(&parent), serialize(&child)];
    let package = knots.accept_package_from(&raws, &coins).unwrap();
    assert!(package.each.iter().all(Result::is_err));
    assert!(has(&knots, &old));
}
