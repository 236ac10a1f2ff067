//! BIP158 basic filters and BIP157 filter headers against data we did not compute: the BIP's
//! own test vectors, bitcoind's `getblockfilter` over the 206-block regtest chain; then the same
//! after a reorg, and built afresh for a store from before filters existed (schema 1).

use crate::common;

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use bitcoin::bip158::FilterHeader;
use bitcoin::consensus::{deserialize, serialize};
use bitcoin::hex::{DisplayHex, FromHex};
use bitcoin::{Block, ScriptBuf};

use cairn::index::{filters, Index};
use cairn::kernel::{BlockUndo, SpentOutput, Validator};
use cairn::store::schema::{cf, meta};
use cairn::store::Store;

fn open(dir: &Path) -> (Validator, Index) {
    let (validator, index, _) = common::open_index(dir);
    (validator, index)
}

#[test]
fn bip158_test_vectors() {
    let rows: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(common::data("bip158-testnet-19.json")).unwrap(),
    )
    .unwrap();
    let mut checked = 0;
    for row in rows.iter().skip(1) {
        let block: Block =
            deserialize(&Vec::<u8>::from_hex(row[2].as_str().unwrap()).unwrap()).unwrap();
        assert_eq!(block.block_hash().to_string(), row[1].as_str().unwrap());
        let spent = row[3]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| SpentOutput {
                txout: bitcoin::TxOut {
                    value: bitcoin::Amount::ZERO,
                    script_pubkey: ScriptBuf::from_bytes(
                        Vec::<u8>::from_hex(s.as_str().unwrap()).unwrap(),
                    ),
                },
                height: 0,
                coinbase: false,
            })
            .collect();
        let undo = BlockUndo { txs: vec![spent] };
        let filter = filters::basic_filter(&block, &undo).unwrap();
        assert_eq!(
            filter.to_lower_hex_string(),
            row[5].as_str().unwrap(),
            "filter of {} ({})",
            row[0],
            row[7]
        );
        let prev = FilterHeader::from_str(row[4].as_str().unwrap()).unwrap();
        assert_eq!(
            filters::filter_header(&filter, &prev).to_string(),
            row[6].as_str().unwrap(),
            "header of {}",
            row[0]
        );
        checked += 1;
    }
    assert_eq!(checked, 10);
}

/// The 206-block chain from the kernel crate's tests, validated and indexed.
fn index_206(dir: &Path) -> (Validator, Index) {
    let (v, index) = open(dir);
    let text = std::fs::read_to_string(common::data("regtest-206-blocks.hex.txt")).unwrap();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        v.submit_block(&Vec::<u8>::from_hex(line.trim()).unwrap())
            .unwrap();
    }
    index.sync(&v).unwrap();
    (v, index)
}

fn assert_matches_bitcoind(index: &Index) {
    let want: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(common::data("regtest-206-filters-by-bitcoind.json")).unwrap(),
    )
    .unwrap();
    let rows = want["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 207);
    for row in rows {
        let height = row[0].as_u64().unwrap() as u32;
        let got = index
            .filter_at(height)
            .unwrap()
            .unwrap_or_else(|| panic!("no filter at {height}"));
        assert_eq!(
            index.with_chain(|c| c.hash(height)).unwrap().to_string(),
            row[1].as_str().unwrap()
        );
        assert_eq!(
            got.filter.to_lower_hex_string(),
            row[2].as_str().unwrap(),
            "filter at {height}"
        );
        assert_eq!(
            got.header.to_string(),
            row[3].as_str().unwrap(),
            "filter header at {height}"
        );
    }
    assert!(index.filter_at(207).unwrap().is_none());
}

#[test]
fn regtest_206_filters_equal_bitcoinds() {
    let tmp = tempfile::tempdir().unwrap();
    let (_v, index) = index_206(tmp.path());
    assert_matches_bitcoind(&index);
}

#[test]
fn a_store_from_before_filters_builds_them_on_start() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let (_v, index) = index_206(tmp.path());
        // Make it a schema-1 store: no filter rows, version 1.
        let store = index.store();
        let mut batch = rocksdb::WriteBatch::default();
        for h in 0..=206u32 {
            batch.delete_cf(store.cf(cf::FILTERS), h.to_be_bytes());
        }
        batch.put_cf(store.cf(cf::META), meta::VERSION, 1u32.to_le_bytes());
        // Schema 1 also gave OP_RETURN outputs (the witness commitments) history rows.
        let text = std::fs::read_to_string(common::data("regtest-206-blocks.hex.txt")).unwrap();
        let mut injected = 0;
        for (i, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
            let block: Block = deserialize(&Vec::<u8>::from_hex(line.trim()).unwrap()).unwrap();
            let first = index.with_chain(|c| c.txnums(i as u32 + 1).unwrap().start);
            for (pos, tx) in block.txdata.iter().enumerate() {
                for out in tx.output.iter().filter(|o| o.script_pubkey.is_op_return()) {
                    let sh = cairn::types::ScriptHash::of(&out.script_pubkey);
                    let key = cairn::store::schema::HistoryKey::encode(
                        &sh,
                        cairn::types::TxNum(first + pos as u64),
                    );
                    batch.put_cf(store.cf(cf::HISTORY), key, []);
                    injected += 1;
                }
            }
        }
        assert!(injected > 0, "the chain has OP_RETURN outputs");
        store.write(batch).unwrap();
        assert!(index.filter_at(0).unwrap().is_none());
    }
    // Reopened: upgraded (through schema 2) to the current schema, filters pending until the
    // indexer builds them.
    let (v, index) = open(tmp.path());
    assert_eq!(
        index.store().get(cf::META, meta::VERSION).unwrap().unwrap(),
        cairn::store::SCHEMA_VERSION.to_le_bytes()
    );
    assert!(!index.filters_ready().unwrap());
    assert!(
        index.filter_at(0).unwrap().is_none(),
        "no filters served before they are complete"
    );
    let stats = index.sync(&v).unwrap();
    assert_eq!(stats.connected, 0);
    assert!(index.filters_ready().unwrap());
    assert_matches_bitcoind(&index);
    // Row for row what a fresh schema-2 index of the chain holds (OP_RETURN history rows gone).
    let fresh_dir = tempfile::tempdir().unwrap();
    let (_v2, fresh) = index_206(fresh_dir.path());
    assert_eq!(index.dump().unwrap(), fresh.dump().unwrap());
}

#[test]
fn a_reorg_replaces_the_filters_of_disconnected_blocks() {
    use cairn::generate::{ChainGenerator, GenerateOptions};
    let tmp = tempfile::tempdir().unwrap();
    let (v, index) = open(tmp.path());
    let mut gen = ChainGenerator::new(GenerateOptions {
        blocks: 0,
        txs_per_block: 20,
        seed: 21,
    });
    let common: Vec<Block> = (0..120).map(|_| gen.next_block().unwrap()).collect();
    let mut fork = gen.fork(3);
    let a: Vec<Block> = (0..5).map(|_| gen.next_block().unwrap()).collect();
    let b: Vec<Block> = (0..7).map(|_| fork.next_block().unwrap()).collect();
    for blk in common.iter().chain(&a) {
        v.submit_block(&serialize(blk)).unwrap();
    }
    index.sync(&v).unwrap();
    let before = index.filter_at(121).unwrap().unwrap();
    for blk in &b {
        v.submit_block(&serialize(blk)).unwrap();
    }
    index.sync(&v).unwrap();
    let after = index.filter_at(121).unwrap().unwrap();
    assert_ne!(before, after, "height 121 now holds branch B's block");
    // Each filter is the one of the block now at its height, chained from its parent's header.
    let mut prev = index.filter_at(119).unwrap().unwrap().header;
    for (i, blk) in common[119..].iter().chain(&b).enumerate() {
        let height = 120 + i as u32;
        let row = index.filter_at(height).unwrap().unwrap();
        let (raw, undo) = v.read_block_with_undo(i64::from(height)).unwrap();
        assert_eq!(raw, serialize(blk));
        assert_eq!(
            row.filter,
            filters::basic_filter(blk, &undo).unwrap(),
            "filter at {height}"
        );
        assert_eq!(
            row.header,
            filters::filter_header(&row.filter, &prev),
            "header at {height}"
        );
        prev = row.header;
    }
    assert!(index.filter_at(128).unwrap().is_none());
}

use crate::common::http::{get, text as http};

#[test]
fn http_serves_filters_and_headers_as_bitcoind_computed_them() {
    use std::process::Stdio;
    let tmp = tempfile::tempdir().unwrap();
    let dd = tmp.path().join("dd");
    let cairn = |args: &[&str]| {
        let mut c = common::cairn_in(&dd);
        c.args(["--admin-addr", "127.0.0.1:0"]).args(args);
        c
    };
    let out = cairn(&["import", "--quiet", "--blocks-file"])
        .arg(common::data("regtest-206-blocks.hex.txt"))
        .output()
        .unwrap();
    common::succeeded(&out);
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let config = tmp.path().join("cairn.toml");
    // No host exempt: 127.0.0.1 is one host, whose third connection finds its own host the one
    // holding every place (an exempt newcomer would take the place of the youngest exempt
    // connection instead, each being a host of its own).
    std::fs::write(
        &config,
        "http_max_connections = 2\nhost_limit_exempt = []\n",
    )
    .unwrap();
    let mut child = cairn(&[
        "--http-addr",
        &addr.to_string(),
        "--electrum-addr",
        "127.0.0.1:0",
        "--no-listen",
        "run",
    ])
    .arg("--config")
    .arg(&config)
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let start = std::time::Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "HTTP server never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let want: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(common::data("regtest-206-filters-by-bitcoind.json")).unwrap(),
    )
    .unwrap();
    let rows = want["rows"].as_array().unwrap();

    // /filter/{hash} for a few blocks: bitcoind's filter and header.
    for h in [0usize, 1, 100, 206] {
        let (status, head, body) = get(addr, &format!("/filter/{}", rows[h][1].as_str().unwrap()));
        assert_eq!(status, 200, "{body}");
        assert!(
            head.to_ascii_lowercase()
                .contains("access-control-allow-origin: *"),
            "{head}"
        );
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["height"], h);
        assert_eq!(v["filter"], rows[h][2]);
        assert_eq!(v["header"], rows[h][3]);
    }
    // /filterheaders over the whole chain (count past the tip is cut at the tip).
    let (status, _, body) = get(addr, "/filterheaders?start=0&count=2000");
    assert_eq!(status, 200);
    let list: Vec<serde_json::Value> = serde_json::from_str(&body).unwrap();
    assert_eq!(list.len(), 207);
    for (entry, row) in list.iter().zip(rows) {
        assert_eq!(
            (&entry["height"], &entry["blockhash"], &entry["header"]),
            (&row[0], &row[1], &row[3])
        );
    }
    // Bad requests get a status and a reason; the server keeps serving.
    let unknown = "00".repeat(32);
    for (path, code) in [
        ("/filter/nothex", 400),
        (&*format!("/filter/{unknown}"), 404),
        ("/filterheaders?start=0&count=2001", 400),
        ("/filterheaders?start=-1&count=5", 400),
        ("/filterheaders?start=0", 400),
        ("/filterheaders?start=300&count=5", 404),
    ] {
        let (status, _, body) = get(addr, path);
        assert_eq!(status, code, "{path}: {body}");
        assert!(body.contains("error"), "{path}: {body}");
    }
    // Paths of neither the filters nor the Esplora API: Esplora's 404 and text.
    let (status, _, body) = get(addr, "/somewhere");
    assert_eq!(
        (status, body.as_str()),
        (404, "endpoint does not exist \"/somewhere\"")
    );
    let (status, _, _) = http(addr, "POST /filterheaders?start=0&count=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    assert_eq!(status, 405);
    let (status, _, _) = http(addr, "\x00\x01garbage\r\n\r\n");
    assert!(status == 400 || status == 0, "garbage got {status}");
    let (status, _, body) = get(addr, "/filterheaders?start=205&count=5");
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Vec<serde_json::Value>>(&body)
            .unwrap()
            .len(),
        2
    );

    // Two clients that hold their connections fill `http_max_connections = 2`: a third of the
    // same host gets one of the places held for health checks, where anything but `/health` is
    // a 503; once one leaves, requests are served again.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let idle: Vec<std::net::TcpStream> = (0..2)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (status, _, _) = get(addr, "/filterheaders?start=0&count=1");
    assert_eq!(
        status, 503,
        "a client over the connection limit is told to come back"
    );
    assert_eq!(
        get(addr, "/health").0,
        200,
        "health checks still get through"
    );
    drop(idle);
    let start = std::time::Instant::now();
    while get(addr, "/filterheaders?start=0&count=1").0 != 200 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "places never came back"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn filters_off_writes_none_and_turning_them_on_builds_them_all() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    {
        let validator = common::open_validator(dir).0;
        let store = Arc::new(Store::open(&dir.join("index")).unwrap());
        let index = Index::open_with_filters(store.clone(), None, false).unwrap();
        let text = std::fs::read_to_string(common::data("regtest-206-blocks.hex.txt")).unwrap();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            validator
                .submit_block(&Vec::<u8>::from_hex(line.trim()).unwrap())
                .unwrap();
        }
        index.sync(&validator).unwrap();
        assert_eq!(index.tip().unwrap().0, 206);
        assert!(!index.filters_ready().unwrap());
        assert!(index.filter_at(10).unwrap().is_none());
        assert_eq!(
            store.scan_prefix(None, cf::FILTERS, &[]).count(),
            0,
            "no filter rows written"
        );
    }
    // On again: every filter is built before anything is served, and equals bitcoind's.
    let (v, index) = open(dir);
    assert!(!index.filters_ready().unwrap());
    index.sync(&v).unwrap();
    assert_matches_bitcoind(&index);
}
