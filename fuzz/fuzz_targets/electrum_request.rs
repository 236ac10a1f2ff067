//! The Electrum request parser and dispatcher (`cairn::electrum::Requests`), the part of a
//! session after line framing, over a real index of a generated regtest chain with transactions
//! and a mempool. Each input is split into lines, all answered by one client session (so version
//! negotiation and subscriptions carry over); every answer must be one JSON value, and a batch's
//! answer an array.
#![no_main]

use std::sync::{Arc, OnceLock};

use bitcoin::consensus::serialize;
use cairn::config::{ElectrumConfig, MempoolConfig};
use cairn::electrum::{Backend, Requests};
use cairn::generate::{ChainGenerator, GenerateOptions};
use cairn::index::Index;
use cairn::kernel::{Validator, ValidatorConfig};
use cairn::mempool::Mempool;
use cairn::notify::Notifier;
use cairn::store::Store;
use cairn::types::Network;
use cairn::view::{CacheSettings, ReadModel};
use libfuzzer_sys::fuzz_target;

/// 110 blocks with 3 transactions each once coinbases matured, indexed.
fn backend() -> Arc<Backend> {
    static BACKEND: OnceLock<(Arc<Backend>, tempfile::TempDir)> = OnceLock::new();
    let (backend, _) = BACKEND.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = ValidatorConfig {
            network: Network::Regtest,
            signet_challenge: None,
            kernel_dir: dir.path().join("kernel"),
            blocks_dir: dir.path().join("kernel/blocks"),
            script_threads: 0,
        };
        // The event receiver is dropped: nothing here follows the kernel after the sync.
        let (validator, _events) = Validator::open(&config).expect("validator");
        let mut gen = ChainGenerator::new(GenerateOptions {
            blocks: 0,
            txs_per_block: 3,
            seed: 7,
        });
        for _ in 0..110 {
            validator
                .submit_block(&serialize(&gen.next_block().expect("block")))
                .expect("submit");
        }
        let store = Arc::new(Store::open(&dir.path().join("index")).expect("store"));
        let files = cairn::kernel::blockfiles::KernelBlockFiles::new(
            &config.blocks_dir,
            Network::Regtest.magic(),
        );
        let index = Arc::new(Index::open(store, Some(files)).expect("index"));
        index.sync(&validator).expect("sync");
        let model = ReadModel::new(
            index,
            Arc::new(validator),
            Some(Arc::new(Mempool::new(MempoolConfig::default()))),
            CacheSettings::default(),
        );
        let backend = Backend {
            model: Arc::new(model),
            notifier: Notifier::default(),
            config: ElectrumConfig::defaults(Network::Regtest),
            pool: cairn::work::WorkPool::new(4, 64),
            verdicts: Default::default(),
        };
        (Arc::new(backend), dir)
    });
    backend.clone()
}

fuzz_target!(|data: &[u8]| {
    let mut client = Requests::new(backend());
    for line in data.split(|&b| b == b'\n').take(16) {
        let Some(answer) = client.answer(line) else {
            continue;
        };
        let value: serde_json::Value = serde_json::from_str(&answer).expect("an answer is JSON");
        if line.trim_ascii_start().first() == Some(&b'[') && value.is_array() {
            assert!(!value.as_array().expect("array").is_empty());
        }
    }
});
