//! One function per command but `run` (a node's life is `lifecycle.rs`'s): importing blocks,
//! generating a chain, the demo, asking a running node its status or to stop, and the index's
//! maintenance (`reindex`, `index-stats`).

use std::sync::atomic::AtomicBool;

use anyhow::{bail, Result};

use cairn::admin::{AdminClient, Status};
use cairn::config::Settings;
use cairn::datadir::{DataDir, DataDirError};
use cairn::generate::{ChainGenerator, GenerateOptions, Shapes, Spending};
use cairn::import::{BlkDir, ImportStats, Importer, Progress};
use cairn::node::{self, Node};
use cairn::notify::Notifier;

use super::args::{DemoArgs, GenerateArgs, ImportArgs, ShapeSource, Signatures};
use super::lifecycle::{open_node, serve, start_consumer};
use super::signals::signals;

pub(crate) fn import(settings: Settings, args: &ImportArgs) -> Result<()> {
    let mut node = open_node(settings, !args.no_index)?;
    let runner = start_consumer(&mut node, &Notifier::default(), false)?;
    let stop = &signals()?.interrupted;
    let result = import_into(
        &node,
        args.blocks_dir.as_deref(),
        args.blocks_file.as_deref(),
        args.quiet,
        stop,
    );
    let index_started = std::time::Instant::now();
    if let Some(runner) = runner {
        runner.finish()?;
    }
    let stats = result?;
    let index_wait = index_started.elapsed().as_secs_f64();
    let tip = node.validator.tip();
    let index_tip = node::index_tip(node.index.as_deref());
    if args.json {
        let out = serde_json::json!({
            "stats": stats,
            "tip": {"height": tip.height, "hash": tip.hash.to_string()},
            "index_tip": index_tip,
            "blocks_per_sec": stats.blocks_per_sec(),
            "txs_per_sec": stats.txs_per_sec(),
            "index_catch_up_seconds": index_wait,
        });
        println!("{out}");
    } else {
        println!(
            "imported {} blocks ({} txs) in {:.1}s: {:.0} blocks/s, {:.0} txs/s; {} already had; tip {} at height {}",
            stats.connected + stats.stored,
            stats.txs,
            stats.seconds,
            stats.blocks_per_sec(),
            stats.txs_per_sec(),
            stats.already_had,
            tip.hash,
            tip.height
        );
        match index_tip {
            Some(t) => println!(
                "index at height {} ({:.1}s after validation ended)",
                t.height, index_wait
            ),
            None => println!("no index (--no-index)"),
        }
    }
    Ok(())
}

fn import_into(
    node: &Node,
    blocks_dir: Option<&std::path::Path>,
    blocks_file: Option<&std::path::Path>,
    quiet: bool,
    stop: &AtomicBool,
) -> Result<ImportStats> {
    let _span = tracing::info_span!("import").entered();
    let importer =
        Importer::new(&node.validator, Progress::new(quiet), stop).with_space(&node.space);
    let stats = match (blocks_dir, blocks_file) {
        (Some(dir), _) => {
            let label = node::network_label(&node.settings);
            let blk = BlkDir::open(dir, node.settings.magic(), &label)?;
            importer.import_blk_dir(&blk)?
        }
        (None, Some(file)) => importer.import_hex_file(file)?,
        (None, None) => bail!("give --blocks-dir or --blocks-file"),
    };
    Ok(stats)
}

pub(crate) fn generate(args: &GenerateArgs) -> Result<()> {
    let opts = GenerateOptions {
        blocks: args.blocks,
        txs_per_block: args.txs_per_block,
        seed: args.seed,
    };
    let mut generator = ChainGenerator::new(opts);
    if args.signatures == Signatures::None {
        generator = generator.with_spending(Spending::SignatureFree);
    }
    if args.wallet_addresses > 0 {
        generator = generator
            .with_wallet(args.wallet_addresses)?
            .with_wallet_share(args.wallet_per_mille);
    }
    if args.hot_per_mille > 0 {
        generator = generator.with_hot_script(args.hot_per_mille);
    }
    if let Some(ShapeSource::Mainnet) = args.shape {
        generator = generator.with_shapes(Shapes::mainnet()?);
    }
    if args.silent_payments_per_mille > 0 {
        generator = generator.with_silent_payments(args.silent_payments_per_mille)?;
    }
    let summary = generator.write_to(&args.out)?;
    if args.silent_payments_per_mille > 0 {
        println!(
            "silent-payment wallet: {} outputs paid; keys and payments in {}",
            summary.silent_payments,
            args.out.join("silent-payments.json").display()
        );
    }
    if args.wallet_addresses > 0 {
        println!(
            "wallet: {} receive addresses, {} transactions; descriptors in {}",
            args.wallet_addresses,
            summary.wallet_txs,
            args.out.join("wallet.txt").display()
        );
    }
    println!(
        "generated {} blocks with {} txs ({} bytes, {} scripts, the busiest with {} history entries) into {}: tip {}",
        summary.blocks,
        summary.txs,
        summary.bytes,
        summary.scripts,
        summary.max_script_history,
        args.out.display(),
        summary.tip
    );
    Ok(())
}

/// A status without a node's figures: nothing has run in the data dir, or a `cairn run` is
/// starting on it (its lock held, its admin RPC not answering yet). As JSON:
/// `{"network", "datadir", "running", "state"}`.
fn tell_state(settings: &Settings, json: bool, running: bool, state: &str) -> Result<()> {
    let network = node::network_label(settings);
    let datadir = settings.network_dir().display().to_string();
    if json {
        let answer = serde_json::json!({
            "network": network,
            "datadir": datadir,
            "running": running,
            "state": state,
        });
        println!("{answer}");
    } else {
        println!("network:    {network}");
        println!("datadir:    {datadir}");
        println!("running:    {running} ({state})");
    }
    Ok(())
}

pub(crate) fn status(settings: Settings, json: bool) -> Result<()> {
    // Nothing has run here: said so, and no data dir is created for it.
    let Some(datadir) = node::existing_datadir(&settings)? else {
        return tell_state(
            &settings,
            json,
            false,
            "no data dir: nothing has run here yet",
        );
    };
    let status = match datadir.lock() {
        // Nobody runs here: the tips are read from the folder, opening nothing, under the lock
        // for the few milliseconds that takes (a `cairn run` starting meanwhile waits for it).
        Ok(lock) => {
            let stopped = stopped_status(&settings, &datadir, json);
            drop(lock);
            match stopped? {
                Some(status) => status,
                None => return Ok(()),
            }
        }
        Err(DataDirError::Locked { .. }) => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let asked = rt.block_on(async { AdminClient::connect(&datadir)?.status().await });
            match asked {
                Ok(status) => status,
                // The lock is held, the admin RPC not up yet: a `cairn run` starting.
                Err(_) => return tell_state(&settings, json, true, "starting"),
            }
        }
        Err(e) => return Err(e.into()),
    };
    if json {
        println!("{}", serde_json::to_string(&status)?);
    } else {
        println!("network:    {}", status.network);
        println!("datadir:    {}", status.datadir);
        println!("running:    {}", status.running);
        println!(
            "kernel tip: {} at height {}",
            status.kernel_tip.hash, status.kernel_tip.height
        );
        match &status.index_tip {
            Some(t) => println!("index tip:  {} at height {}", t.hash, t.height),
            None => println!("index tip:  none (no index yet)"),
        }
        if let Some(p2p) = &status.p2p {
            match p2p.listen {
                Some(addr) => println!("p2p:        accepting peers on {addr}"),
                None => println!("p2p:        not accepting peers"),
            }
            let inbound = p2p.peers.iter().filter(|p| p.inbound).count();
            println!(
                "peers:      {} outbound, {inbound} inbound; {} known addresses",
                p2p.peers.len() - inbound,
                p2p.known_addresses
            );
            for p in &p2p.peers {
                println!(
                    "  {} {} {}",
                    if p.inbound { "in " } else { "out" },
                    p.addr,
                    p.user_agent
                );
            }
        }
        if let Some(sync) = &status.syncing {
            println!(
                "syncing:    height {} of {} (clients are answered once it is done)",
                sync.height, sync.headers
            );
        }
        if let Some(error) = &status.kernel_error {
            println!("kernel:     stopped: {error}");
        }
        if let Some(disk) = &status.disk {
            let low = if disk.low {
                "; too low: no blocks are taken until space is freed"
            } else {
                ""
            };
            println!(
                "disk:       {} MiB free (min_free_space_mb {}){low}",
                disk.free_mb, disk.min_free_mb
            );
        }
    }
    Ok(())
}

/// A stopped node's status from its folder alone: `None` when it was told already (no kernel
/// tip recorded: the last run did not exit cleanly).
fn stopped_status(settings: &Settings, datadir: &DataDir, json: bool) -> Result<Option<Status>> {
    let (kernel_tip, index_tip) = node::stopped_tips(datadir)?;
    let Some(kernel_tip) = kernel_tip else {
        // Only its identity: a `run` that wrote it and is about to take the lock, or one that
        // stopped before it opened anything.
        let state = match datadir.kernel_dir().exists() {
            false => "nothing has run here yet",
            true => "stopped without a clean exit: the kernel's tip is known once it starts again",
        };
        if json {
            let answer = serde_json::json!({
                "network": node::network_label(settings),
                "datadir": datadir.root().display().to_string(),
                "running": false,
                "state": state,
                "index_tip": index_tip,
            });
            println!("{answer}");
        } else {
            tell_state(settings, false, false, state)?;
            match &index_tip {
                Some(t) => println!("index tip:  {} at height {}", t.hash, t.height),
                None => println!("index tip:  none (no index yet)"),
            }
        }
        return Ok(None);
    };
    Ok(Some(Status {
        network: node::network_label(settings),
        kernel_tip,
        index_tip,
        datadir: datadir.root().display().to_string(),
        running: false,
        p2p: None,
        syncing: None,
        kernel_error: None,
        disk: None,
    }))
}

/// `cairn reindex`: throws the index away and builds it again from the kernel's blocks, with a
/// progress line every 10 s; prints blocks, transactions, seconds and transactions per second.
pub(crate) fn reindex(settings: Settings, json: bool) -> Result<()> {
    let mut node = open_node(settings, false)?;
    let tip = node.validator.tip();
    let index = node.fresh_index()?;
    // An interrupted reindex resumes from whatever it flushed, so the log is not needed.
    index.store().set_bulk_load(true)?;
    let started = std::time::Instant::now();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let progress = {
        let (index, done) = (index.clone(), done.clone());
        std::thread::spawn(move || {
            let mut last = std::time::Instant::now();
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(100));
                if last.elapsed() >= std::time::Duration::from_secs(10) {
                    last = std::time::Instant::now();
                    let height = index.tip().map(|(h, _)| i64::from(h)).unwrap_or(-1);
                    tracing::info!("reindex: height {height} of {}", tip.height);
                }
            }
        })
    };
    let synced = index.sync(&node.validator);
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = progress.join();
    let stats = synced?;
    // Left to the next run, as after an import.
    if u64::from(stats.connected) >= cairn::node::runner::SETTLE_AFTER_BLOCKS {
        cairn::node::runner::set_unsettled(index.store(), true)?;
    }
    index.store().set_bulk_load(false)?;
    let seconds = started.elapsed().as_secs_f64();
    let txs = index.with_chain(|c| c.next_txnum().0);
    let blocks = index.tip().map(|(h, _)| u64::from(h) + 1).unwrap_or(0);
    drop(index);
    node.close();
    let rate = txs as f64 / seconds.max(1e-9);
    if json {
        println!(
            "{}",
            serde_json::json!({"blocks": blocks, "txs": txs, "seconds": seconds, "txs_per_second": rate})
        );
    } else {
        println!("reindexed {blocks} blocks, {txs} transactions in {seconds:.2} s ({rate:.0} transactions/s)");
    }
    Ok(())
}

pub(crate) fn index_stats(settings: Settings) -> Result<()> {
    let node = open_node(settings, true)?;
    let Some(index) = &node.index else {
        bail!("no index");
    };
    let store = index.store();
    store.flush()?;
    store.compact();
    let sizes = store.disk_bytes();
    let total: u64 = sizes.iter().map(|(_, b)| b).sum();
    let txs = index.with_chain(|c| c.next_txnum().0);
    // Serialized size of every indexed block (the kernel's files are padded, so not their size).
    let tip = index.tip().map(|(h, _)| h).unwrap_or(0);
    let mut blocks_bytes = 0u64;
    for h in 0..=tip {
        blocks_bytes += node.validator.read_block_bytes(i64::from(h))?.len() as u64;
    }
    let per_cf: serde_json::Map<String, serde_json::Value> = sizes
        .iter()
        .map(|(name, bytes)| (name.to_string(), serde_json::json!(bytes)))
        .collect();
    // Silent-payment tweaks: transactions with one (in a row per block), for bytes per tweak.
    let mut tweaked_txs = 0u64;
    let snapshot = store.snapshot();
    store.for_each_in_prefix::<cairn::store::StoreError>(
        &snapshot,
        cairn::store::schema::cf::TWEAKS,
        &[],
        |_, value| {
            for entry in cairn::store::schema::BlockTweaks::entries(value) {
                entry?;
                tweaked_txs += 1;
            }
            Ok(true)
        },
    )?;
    let out = serde_json::json!({
        "tweaked_txs": tweaked_txs,
        "index_tip": node::index_tip(Some(index)),
        "txs": txs,
        "index_bytes": total,
        "bytes_per_tx": total as f64 / txs.max(1) as f64,
        "block_bytes": blocks_bytes,
        "index_to_block_bytes": total as f64 / blocks_bytes.max(1) as f64,
        "column_families": per_cf,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

pub(crate) fn stop(settings: Settings) -> Result<()> {
    let datadir = node::open_datadir(&settings)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let answer = rt.block_on(async { AdminClient::connect(&datadir)?.stop().await })?;
    println!("{answer}");
    Ok(())
}

/// How long `cairn snapshot` waits for the node: hashing a mainnet node's files takes a while.
const SNAPSHOT_WAIT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

pub(crate) fn snapshot(settings: Settings, dir: &std::path::Path) -> Result<()> {
    let datadir = node::existing_datadir(&settings)?.ok_or_else(|| {
        anyhow::anyhow!(
            "no running cairn found: nothing has run in {}",
            settings.network_dir().display()
        )
    })?;
    let dir = std::path::absolute(dir)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = rt.block_on(async {
        AdminClient::connect_waiting(&datadir, SNAPSHOT_WAIT)?
            .snapshot(&dir)
            .await
    })?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

pub(crate) fn demo(settings: Settings, args: &DemoArgs) -> Result<()> {
    if settings.network != cairn::types::Network::Regtest {
        bail!(
            "the demo runs on regtest only (got --network {})",
            settings.network
        );
    }
    let mut node = open_node(settings, true)?;
    let chain_dir = node.datadir.root().join("demo-chain");
    let opts = GenerateOptions {
        blocks: args.blocks,
        txs_per_block: args.txs_per_block,
        seed: 1,
    };
    if !chain_dir.join("blocks.hex").exists() {
        println!(
            "generating a {}-block regtest chain with about {} txs per block into {}",
            args.blocks,
            args.txs_per_block,
            chain_dir.display()
        );
        let summary = ChainGenerator::new(opts).write_to(&chain_dir)?;
        println!(
            "generated {} blocks, {} txs, {} bytes",
            summary.blocks, summary.txs, summary.bytes
        );
    }
    println!("validating and indexing it ...");
    let stop = &signals()?.interrupted;
    let runner = start_consumer(&mut node, &Notifier::default(), false)?;
    let imported = import_into(&node, Some(&chain_dir.join("blocks")), None, false, stop);
    if let Some(runner) = runner {
        node.events = Some(runner.finish()?);
    }
    let stats = imported?;
    let tip = node.validator.tip();
    println!(
        "validated {} new blocks ({} txs) in {:.1}s; tip {} at height {}; index at height {}",
        stats.connected,
        stats.txs,
        stats.seconds,
        tip.hash,
        tip.height,
        node::index_tip(node.index.as_deref())
            .map(|t| t.height)
            .unwrap_or(-1)
    );

    if args.no_serve {
        return Ok(());
    }
    serve(node)
}
