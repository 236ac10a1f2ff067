//! Issue 28: the silent-payment tweak index. Every generated block's eligible transactions have
//! their tweak rows, computed from prevouts the generator made (not the kernel's undo data),
//! through a reorg; turning tweaks on over an indexed chain, or upgrading a schema-3 store,
//! builds them and ends row for row where an index built with tweaks from the start is.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use bitcoin::consensus::serialize;
use bitcoin::{Block, OutPoint};

use cairn::generate::{ChainGenerator, GenerateOptions};
use cairn::index::{Index, IndexOptions};
use cairn::kernel::Validator;
use cairn::store::schema::{cf, meta};
use cairn::store::Store;
use cairn::types::Network;

fn open(dir: &Path, tweaks: bool) -> (Validator, Index) {
    let validator = common::open_validator(dir).0;
    let store = Arc::new(Store::open(&dir.join("index")).unwrap());
    let files = cairn::kernel::blockfiles::KernelBlockFiles::new(
        &dir.join("kernel/blocks"),
        Network::Regtest.magic(),
    );
    let options = IndexOptions {
        filters: true,
        tweaks_from: tweaks.then_some(0),
    };
    let index = Index::open_with_options(store, Some(files), options).unwrap();
    (validator, index)
}

fn chain(blocks: usize, seed: u64) -> (ChainGenerator, Vec<Block>) {
    let mut gen = ChainGenerator::new(GenerateOptions {
        blocks: 0,
        txs_per_block: 20,
        seed,
    });
    let blocks = (0..blocks).map(|_| gen.next_block().unwrap()).collect();
    (gen, blocks)
}

/// The tweak rows the index serves for heights 1..=n.
fn served(index: &Index, n: u32) -> Vec<Vec<(bitcoin::Txid, [u8; 33], Vec<u64>)>> {
    let view = index.reader();
    (1..=n)
        .map(|h| {
            view.tweaks_at(h)
                .unwrap()
                .unwrap_or_else(|| panic!("no tweaks served at {h}"))
                .into_iter()
                .map(|(_, txid, row)| (txid, row.tweak, row.outputs.iter().map(|o| o.2).collect()))
                .collect()
        })
        .collect()
}

#[test]
fn every_eligible_transaction_has_its_tweak_through_a_reorg() {
    let tmp = tempfile::tempdir().unwrap();
    let (v, index) = open(tmp.path(), true);
    let (mut gen, common) = chain(120, 52);
    let mut fork = gen.fork(5);
    let a: Vec<Block> = (0..5).map(|_| gen.next_block().unwrap()).collect();
    let b: Vec<Block> = (0..7).map(|_| fork.next_block().unwrap()).collect();
    for blk in common.iter().chain(&a) {
        v.submit_block(&serialize(blk)).unwrap();
    }
    index.sync(&v).unwrap();
    let on_a: Vec<&Block> = common.iter().chain(&a).collect();
    let want = common::expected_tweaks(&on_a);
    let eligible: usize = want.iter().map(Vec::len).sum();
    assert!(
        eligible > 50,
        "the chain has eligible transactions: {eligible}"
    );
    assert_eq!(served(&index, 125), want);
    for blk in &b {
        v.submit_block(&serialize(blk)).unwrap();
    }
    index.sync(&v).unwrap();
    let on_b: Vec<&Block> = common.iter().chain(&b).collect();
    assert_eq!(served(&index, 127), common::expected_tweaks(&on_b));
    assert_eq!(index.reader().tweaks_at(128).unwrap(), None);
    // Nothing of branch A is left: the rows are a fresh index's of the same chain.
    let fresh_dir = tempfile::tempdir().unwrap();
    let (fv, fresh) = open(fresh_dir.path(), true);
    for blk in &on_b {
        fv.submit_block(&serialize(*blk)).unwrap();
    }
    fresh.sync(&fv).unwrap();
    assert_eq!(index.dump().unwrap(), fresh.dump().unwrap());
}

#[test]
fn tweaks_turned_on_later_or_after_an_upgrade_are_built_as_from_the_start() {
    let (_, blocks) = chain(110, 53);
    let build = |dir: &Path, tweaks: bool| {
        let (v, index) = open(dir, tweaks);
        for blk in &blocks {
            v.submit_block(&serialize(blk)).unwrap();
        }
        index.sync(&v).unwrap();
    };
    let reference_dir = tempfile::tempdir().unwrap();
    build(reference_dir.path(), true);
    let (_rv, reference) = open(reference_dir.path(), true);
    let reference_rows = reference.dump().unwrap();

    // Indexed without tweaks, then opened with them: none served until the backfill ran.
    let later = tempfile::tempdir().unwrap();
    build(later.path(), false);
    let (v, index) = open(later.path(), true);
    assert!(!index.tweaks_ready().unwrap());
    assert_eq!(index.reader().tweaks_at(5).unwrap(), None);
    let stats = index.sync(&v).unwrap();
    assert_eq!(stats.connected, 0);
    assert!(index.tweaks_ready().unwrap());
    assert_eq!(index.dump().unwrap(), reference_rows);

    // A schema-3 store (no tweaks, no marker) is upgraded, marked, and built the same way.
    let upgraded = tempfile::tempdir().unwrap();
    build(upgraded.path(), true);
    {
        let (_v, index) = open(upgraded.path(), true);
        let store = index.store();
        let mut batch = rocksdb::WriteBatch::default();
        batch.delete_range_cf(store.cf(cf::TWEAKS), [0u8; 5], [0xffu8; 5]);
        batch.put_cf(store.cf(cf::META), meta::VERSION, 3u32.to_le_bytes());
        store.write(batch).unwrap();
    }
    let (v, index) = open(upgraded.path(), true);
    assert!(!index.tweaks_ready().unwrap());
    index.sync(&v).unwrap();
    assert_eq!(index.dump().unwrap(), reference_rows);
    // Turned off, the store says so and its rows are gone; turned on again, all are built.
    drop((v, index));
    {
        let (_v, off) = open(upgraded.path(), false);
        let store = off.store();
        assert!(store.get(cf::META, meta::TWEAKS_OFF).unwrap().is_some());
        assert_eq!(store.scan_prefix(None, cf::TWEAKS, &[]).count(), 0);
    }
    let (v, index) = open(upgraded.path(), true);
    index.sync(&v).unwrap();
    assert!(index.tweaks_ready().unwrap());
    assert_eq!(index.dump().unwrap(), reference_rows);
}

/// The HTTP tweak endpoints, in BlindBit Oracle's v1 shapes under `/silent-payments/`, from a
/// `cairn run --silent-payments` over a generated chain: `tweak-index` is every eligible
/// transaction's tweak, `tweaks` those with a taproot output still unspent, `dustLimit` keeps
/// those whose largest such output is worth that much; `info` and `block-height` say the tip;
/// the filters, spent-index, `utxos` and `compute-index` are the blocks' (see
/// [`blindbits_block_data_is_the_blocks`]).
#[test]
fn http_serves_tweaks_filters_and_utxos_in_blindbits_shapes() {
    use bitcoin::hex::{DisplayHex, FromHex};
    use common::http::get;
    use std::process::{Command, Stdio};
    let tmp = tempfile::tempdir().unwrap();
    let chain = tmp.path().join("chain");
    let opts = GenerateOptions {
        blocks: 115,
        txs_per_block: 20,
        seed: 72,
    };
    ChainGenerator::new(opts).write_to(&chain).unwrap();
    let text = std::fs::read_to_string(chain.join("blocks.hex")).unwrap();
    let blocks: Vec<Block> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| bitcoin::consensus::deserialize(&Vec::<u8>::from_hex(l.trim()).unwrap()).unwrap())
        .collect();
    let dd = tmp.path().join("dd");
    let cairn = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
        c.arg("--datadir")
            .arg(&dd)
            .args(["--admin-addr", "127.0.0.1:0", "--silent-payments"])
            .args(args)
            .env("CAIRN_LOG", "warn");
        c
    };
    let out = cairn(&["import", "--quiet", "--blocks-file"])
        .arg(chain.join("blocks.hex"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let addr = common::free_addr();
    let child = cairn(&[
        "--http-addr",
        &addr.to_string(),
        "--electrum-addr",
        "127.0.0.1:0",
    ])
    .args(["--no-listen", "run"])
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let _running = KilledOnDrop(child);
    let start = std::time::Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(start.elapsed().as_secs() < 60, "HTTP server never started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let json = |path: &str| {
        let (status, _, body) = get(addr, path);
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str::<serde_json::Value>(&body).unwrap()
    };
    let info = json("/silent-payments/info");
    assert_eq!(
        (info["network"].as_str(), info["height"].as_u64()),
        (Some("regtest"), Some(115))
    );
    assert_eq!(json("/silent-payments/block-height")["block_height"], 115);

    // Expected from the blocks themselves: tweaks, and which taproot outputs a later block spends.
    let refs: Vec<&Block> = blocks.iter().collect();
    let want = common::expected_tweaks(&refs);
    let spent: HashSet<OutPoint> = blocks
        .iter()
        .flat_map(|b| {
            b.txdata
                .iter()
                .flat_map(|t| t.input.iter().map(|i| i.previous_output))
        })
        .collect();
    let by_txid: HashMap<bitcoin::Txid, &bitcoin::Transaction> = blocks
        .iter()
        .flat_map(|b| b.txdata.iter().map(|t| (t.compute_txid(), t)))
        .collect();
    let unspent_taproot = |txid: &bitcoin::Txid| -> Vec<u64> {
        by_txid[txid]
            .output
            .iter()
            .enumerate()
            .filter(|(v, o)| {
                o.script_pubkey.is_p2tr() && !spent.contains(&OutPoint::new(*txid, *v as u32))
            })
            .map(|(_, o)| o.value.to_sat())
            .collect()
    };
    type Row = (bitcoin::Txid, [u8; 33], Vec<u64>);
    let largest = |values: &[u64]| values.iter().copied().max().unwrap_or(0);
    let (mut all, mut cut, mut dust_dropped, mut cut_dust_dropped) = (0, 0, 0, 0);
    for (i, rows) in want.iter().enumerate() {
        let h = i + 1;
        let hex = |keep: &dyn Fn(&Row) -> bool| {
            serde_json::json!(rows
                .iter()
                .filter(|r| keep(r))
                .map(|r| r.1[..].to_lower_hex_string())
                .collect::<Vec<_>>())
        };
        let index = json(&format!("/silent-payments/tweak-index/{h}"));
        assert_eq!(index, hex(&|_| true), "{h}");
        // A dust limit from the data: the block's largest transaction's largest output.
        let dust = rows.iter().map(|r| largest(&r.2)).max().unwrap_or(0);
        let big = |r: &Row| largest(&r.2) >= dust;
        let path = format!("/silent-payments/tweak-index/{h}?dustLimit={dust}");
        assert_eq!(json(&path), hex(&big), "{path}");
        dust_dropped += rows.iter().filter(|r| !big(r)).count();
        let alive = |r: &Row| !unspent_taproot(&r.0).is_empty();
        assert_eq!(
            json(&format!("/silent-payments/tweaks/{h}")),
            hex(&alive),
            "{h}"
        );
        // Cut-through with a dust limit: the largest *unspent* output decides.
        let cut_dust = rows
            .iter()
            .filter(|r| alive(r))
            .map(|r| largest(&unspent_taproot(&r.0)))
            .max();
        if let Some(cut_dust) = cut_dust {
            let kept = |r: &Row| largest(&unspent_taproot(&r.0)) >= cut_dust;
            let path = format!("/silent-payments/tweaks/{h}?dust={cut_dust}");
            assert_eq!(json(&path), hex(&kept), "{path}");
            cut_dust_dropped += rows.iter().filter(|r| alive(r) && !kept(r)).count();
        }
        all += rows.len();
        cut += rows.iter().filter(|r| alive(r)).count();
    }
    assert!(
        all > 20 && cut < all,
        "{all} eligible, {cut} with unspent taproot outputs"
    );
    assert!(
        dust_dropped > 0 && cut_dust_dropped > 0,
        "the dust limits left nothing out"
    );
    assert_eq!(json("/silent-payments/info")["tweaks_only"], false);
    blindbits_block_data_is_the_blocks(&json, &blocks, &want, &spent);
    for path in [
        "tweaks/116",
        "utxos/116",
        "filter/spent/116",
        "compute-index/116",
    ] {
        let (status, _, _) = get(addr, &format!("/silent-payments/{path}"));
        assert_eq!(status, 404, "{path}");
    }
    let (status, _, _) = get(addr, "/silent-payments/tweaks/5?dustLimit=x");
    assert_eq!(status, 400);
}

/// BlindBit's filters, spent-index and `utxos`, and its v2 `compute-index`, against what the
/// generated blocks hold: each filter read with rust-bitcoin's BIP158 reader finds every
/// element BlindBit puts in it (every taproot output's x-only key; for each input spending a
/// taproot output, `SHA256(txid ‖ vout ‖ block hash)[..8]`, the spent-index in block order).
fn blindbits_block_data_is_the_blocks(
    json: &dyn Fn(&str) -> serde_json::Value,
    blocks: &[Block],
    want: &[Vec<(bitcoin::Txid, [u8; 33], Vec<u64>)>],
    spent: &HashSet<OutPoint>,
) {
    use bitcoin::bip158::BlockFilter;
    use bitcoin::hashes::{sha256, Hash};
    use bitcoin::hex::{DisplayHex, FromHex};
    let outputs: HashMap<OutPoint, bitcoin::TxOut> = blocks
        .iter()
        .flat_map(|b| b.txdata.iter())
        .flat_map(|t| {
            let txid = t.compute_txid();
            t.output
                .iter()
                .enumerate()
                .map(move |(v, o)| (OutPoint::new(txid, v as u32), o.clone()))
        })
        .collect();
    let filter = |path: &str, hash: &bitcoin::BlockHash, h: usize| {
        let answer = json(path);
        assert_eq!(answer["block_hash"], hash.to_string(), "{path}");
        assert_eq!(answer["block_height"], h, "{path}");
        assert_eq!(answer["filter_type"], 4, "{path}");
        Vec::<u8>::from_hex(answer["data"].as_str().unwrap()).unwrap()
    };
    let (mut spends, mut keys, mut utxos) = (0, 0, 0);
    for (i, block) in blocks.iter().enumerate() {
        let (h, hash) = (i + 1, block.block_hash());
        let taproot: Vec<[u8; 32]> = block
            .txdata
            .iter()
            .flat_map(|t| t.output.iter())
            .filter(|o| o.script_pubkey.is_p2tr())
            .map(|o| o.script_pubkey.as_bytes()[2..34].try_into().unwrap())
            .collect();
        let data = filter(&format!("/silent-payments/filter/new-utxos/{h}"), &hash, h);
        assert_eq!(usize::from(data[0]), taproot.len().min(252), "{h}");
        let read = BlockFilter::new(&data);
        for key in &taproot {
            assert!(
                read.match_any(&hash, std::iter::once(&key[..])).unwrap(),
                "{h}"
            );
        }
        keys += taproot.len();
        let elements: Vec<String> = block.txdata[1..]
            .iter()
            .flat_map(|t| t.input.iter())
            .filter(|i| outputs[&i.previous_output].script_pubkey.is_p2tr())
            .map(|i| {
                let mut pre = serialize(&i.previous_output);
                pre.extend(hash.to_byte_array());
                sha256::Hash::hash(&pre)[..8].to_lower_hex_string()
            })
            .collect();
        let index = json(&format!("/silent-payments/spent-index/{h}"));
        assert_eq!(index["block_hash"], hash.to_string());
        assert_eq!(index["data"], serde_json::json!(elements), "{h}");
        let data = filter(&format!("/silent-payments/filter/spent/{h}"), &hash, h);
        assert_eq!(usize::from(data[0]), elements.len().min(252), "{h}");
        let read = BlockFilter::new(&data);
        for e in &elements {
            let e = Vec::<u8>::from_hex(e).unwrap();
            assert!(
                read.match_any(&hash, std::iter::once(&e[..])).unwrap(),
                "{h}"
            );
        }
        spends += elements.len();
        // `utxos` and `compute-index`: the eligible transactions' taproot outputs.
        let mut rows = Vec::new();
        let mut index = Vec::new();
        for (txid, tweak, _) in &want[i] {
            let tx = block
                .txdata
                .iter()
                .find(|t| t.compute_txid() == *txid)
                .unwrap();
            let mut prefixes = Vec::new();
            for (vout, o) in tx.output.iter().enumerate() {
                if !o.script_pubkey.is_p2tr() {
                    continue;
                }
                rows.push(serde_json::json!({
                    "txid": txid.to_string(), "vout": vout, "value": o.value.to_sat(),
                    "scriptpubkey": o.script_pubkey.to_hex_string(), "block_height": h,
                    "block_hash": hash.to_string(), "timestamp": block.header.time,
                    "spent": spent.contains(&OutPoint::new(*txid, vout as u32)),
                }));
                prefixes.push(o.script_pubkey.as_bytes()[2..10].to_lower_hex_string());
            }
            index.push(serde_json::json!({
                "txid": txid.to_string(), "tweak": tweak.to_lower_hex_string(), "outputs": prefixes,
            }));
        }
        utxos += rows.len();
        assert_eq!(
            json(&format!("/silent-payments/utxos/{h}")),
            serde_json::json!(rows),
            "{h}"
        );
        let compute = json(&format!("/silent-payments/compute-index/{h}"));
        assert_eq!(compute["block_identifier"]["block_hash"], hash.to_string());
        assert_eq!(compute["index"], serde_json::json!(index), "{h}");
    }
    assert!(
        spends > 10 && keys > 50 && utxos > 20,
        "{spends} taproot spends, {keys} taproot outputs, {utxos} utxos"
    );
}

/// A child process killed when the test ends, however it ends.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
