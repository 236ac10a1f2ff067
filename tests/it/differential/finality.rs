//! Issue 27, finality over time: a relative lock that blocks make final, and a reorg that makes
//! it not final again, judged by Bitcoin Core 31.99's `testmempoolaccept` and cairn's default
//! profile at each step, and the transaction leaving both mempools with the reorg (Core's
//! `removeForReorg`).

use super::*;

impl Pair {
    /// Mines a block of no transaction on bitcoind.
    fn mine_empty(&self) {
        self.node.rpc(&["generateblock", &self.miner, "[]"]);
    }

    /// Whether bitcoind's mempool holds `txid`.
    fn core_holds(&self, txid: Txid) -> bool {
        let pool = self.node.rpc_json(&["getrawmempool"]);
        pool.as_array()
            .unwrap()
            .iter()
            .any(|t| t.as_str() == Some(&txid.to_string()))
    }
}

/// A parent confirmed at height T+1 and a child with a relative lock of 3 blocks: refused by
/// both at tips T+1 and T+2 (`non-BIP68-final`), taken by both at T+3. Then a reorg replaces
/// T+1 to T+3 with four blocks that confirm the parent only at T+3: the child leaves both
/// mempools and both refuse it again.
#[test]
fn relative_locks_turn_final_with_blocks_and_back_with_a_reorg() {
    let pair = Pair::start();
    let pool = pair.mempool();
    let tip: u32 = pair.node.rpc(&["getblockcount"]).parse().unwrap();
    let (_, value, script) = pair.coins[0].clone();
    let out = |value: u64| TxOut {
        value: Amount::from_sat(value),
        script_pubkey: script.clone(),
    };
    let parent = spend(&pair, 0, vec![out(value - 1_000)], 0, 0xffff_fffe);
    pair.submit(&pool, &parent);
    pair.mine(1);
    pool.revalidate(&pair.index);
    let child = spend_of(
        &pair,
        OutPoint::new(parent.compute_txid(), 0),
        2,
        vec![out(value - 2_000)],
        0,
        3,
    );
    let verdicts = |when: &str| {
        let (core, ours) = (pair.core(&child), pair.cairn(&child));
        eprintln!("{when}: bitcoind {core:?}, cairn {ours:?}");
        assert_eq!(
            core.as_deref().map(rule),
            ours.as_deref().map(rule),
            "{when}"
        );
        core
    };
    assert_eq!(verdicts("tip T+1").as_deref(), Some("non-BIP68-final"));
    pair.mine(1);
    assert_eq!(verdicts("tip T+2").as_deref(), Some("non-BIP68-final"));
    pair.mine(1);
    pool.revalidate(&pair.index);
    assert_eq!(verdicts("tip T+3"), None);
    pair.submit(&pool, &child);

    // The reorg: T+1 to T+3 out, four blocks in, the parent only in the third.
    let first = pair.node.rpc(&["getblockhash", &(tip + 1).to_string()]);
    pair.node.rpc(&["invalidateblock", &first]);
    assert!(
        !pair.core_holds(child.compute_txid()),
        "bitcoind kept the child"
    );
    pair.mine_empty();
    pair.mine_empty();
    pair.node.rpc(&["generatetoaddress", "1", &pair.miner]);
    pair.mine_empty();
    pair.node
        .wait_for_indexes(std::time::Duration::from_secs(60));
    let parent_block =
        pair.node
            .rpc_json(&["getrawtransaction", &parent.compute_txid().to_string(), "1"]);
    let confirmed_at = pair.node.rpc_json(&[
        "getblockheader",
        parent_block["blockhash"].as_str().unwrap(),
    ])["height"]
        .as_u64();
    assert_eq!(
        confirmed_at,
        Some(u64::from(tip) + 3),
        "the parent moved to T+3"
    );
    pair.follow(tip + 1..=tip + 4);
    assert_eq!(
        pair._validator.tip().hash.to_string(),
        pair.node.rpc(&["getbestblockhash"])
    );
    pool.revalidate(&pair.index);
    assert!(
        pool.entry(&child.compute_txid()).is_none(),
        "cairn kept a child whose relative lock the reorg undid"
    );
    assert!(pool.entry(&parent.compute_txid()).is_none());
    assert_eq!(
        verdicts("after the reorg").as_deref(),
        Some("non-BIP68-final")
    );
}
