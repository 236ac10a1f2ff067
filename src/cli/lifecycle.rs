//! A node's life, in one place: opened (waiting out a `cairn status` that holds its data dir's
//! lock for a moment), the consumer of its kernel events started, its servers run until a
//! signal, `cairn stop` or a fatal error, and its mempool saved on the way out; with the sync
//! progress display while it runs.

use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::{bail, Result};

use cairn::config::Settings;
use cairn::datadir::space::SpaceWatch;
use cairn::datadir::DataDirError;
use cairn::kernel::{KernelEvent, Validator};
use cairn::node::runner::{BulkLoad, IndexRunner};
use cairn::node::services::Services;
use cairn::node::{self, Node, NodeError};
use cairn::notify::Notifier;

use super::signals::{signals, Signals};

/// Opens the node (and its index unless `with_index` is false).
pub fn open_node(settings: Settings, with_index: bool) -> Result<Node> {
    // A `cairn status` that looks at a stopped node holds the lock for a moment: wait that out.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut result = Node::open(settings.clone(), with_index);
    while matches!(result, Err(NodeError::DataDir(DataDirError::Locked { .. })))
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
        result = Node::open(settings.clone(), with_index);
    }
    match result {
        Ok(node) => Ok(node),
        Err(NodeError::DataDir(DataDirError::Locked { path })) => bail!(
            "{} is in use by a running cairn; stop it first (`cairn stop`)",
            path.display()
        ),
        Err(e) => Err(e.into()),
    }
}

pub fn run(settings: Settings, with_index: bool) -> Result<()> {
    let node = open_node(settings, with_index)?;
    serve(node)
}

/// Starts what consumes the kernel's events: the indexer thread when there is an index, else a
/// thread that only logs them. A serving node (`serving`) also loads its saved mempool, and
/// writes the index through RocksDB's write-ahead log once its initial download is over;
/// otherwise (an import) not until the end.
pub fn start_consumer(
    node: &mut Node,
    notifier: &Notifier,
    serving: bool,
) -> Result<Option<IndexRunner>> {
    let Some(events) = node.events.take() else {
        return Ok(None);
    };
    match &node.index {
        Some(index) => Ok(Some(IndexRunner::spawn(
            index.clone(),
            node.validator.clone(),
            node.mempool.clone().map(|pool| {
                (
                    pool,
                    (serving && node.settings.mempool.persist).then(|| node.datadir.mempool_file()),
                )
            }),
            events,
            notifier.clone(),
            if serving {
                BulkLoad::WhileDownloading
            } else {
                BulkLoad::UntilFinished
            },
        )?)),
        None => {
            std::thread::Builder::new()
                .name("kernel-events".into())
                .spawn(move || log_events(events))?;
            Ok(None)
        }
    }
}

/// Logs the kernel's events (a node without an index has nothing else to do with them).
fn log_events(events: std::sync::mpsc::Receiver<KernelEvent>) {
    for event in events {
        match event {
            KernelEvent::BlockConnected { hash, height } => {
                tracing::debug!(target: "kernel", "connected {hash} at height {height}")
            }
            KernelEvent::BlockDisconnected { hash, height } => {
                tracing::info!(target: "kernel", "disconnected {hash} at height {height}")
            }
            KernelEvent::BlockInvalid { hash, result } => {
                tracing::warn!(target: "kernel", "invalid block {hash}: {result}")
            }
            KernelEvent::Warning(Some(message)) => tracing::warn!(target: "kernel", "{message}"),
            other => tracing::trace!(target: "kernel", "{other:?}"),
        }
    }
}

/// Serves the node (admin RPC, and the index with its Electrum server) until `stop` is called,
/// Ctrl-C or SIGTERM.
pub fn serve(mut node: Node) -> Result<()> {
    let signals = signals()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let notifier = Notifier::default();
    let runner = start_consumer(&mut node, &notifier, true)?;
    let served = rt.block_on(async {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let services = Services::start(&node, &notifier, stop_tx).await?;
        let progress = services
            .p2p
            .as_ref()
            .map(|_| tokio::spawn(sync_progress(node.validator.clone())));
        tell_user(&services, &node);
        let ended = run_until_stopped(&services, signals, &node, runner.as_ref(), stop_rx).await;
        if let Some(task) = progress {
            task.abort();
        }
        services.stop().await;
        anyhow::Ok(ended)
    });
    let indexed = match runner {
        Some(runner) => runner.finish().map(drop).map_err(anyhow::Error::from),
        None => Ok(()),
    };
    save_mempool(&node);
    drop(rt);
    node.close();
    let ended = served?;
    if ended == Ended::SpaceReturned {
        return Err(restart());
    }
    indexed?;
    if ended == Ended::Broken {
        anyhow::bail!("cairn stopped: the indexer or the kernel could not go on (see the log)");
    }
    tracing::info!("cairn stopped");
    Ok(())
}

/// Why serving ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// `stop`, Ctrl-C or SIGTERM.
    Asked,
    /// The indexer or the kernel stopped, and not for want of disk space.
    Broken,
    /// The indexer or the kernel stopped when the disk was full, and space is back.
    SpaceReturned,
}

/// Runs this program again with the same arguments in this process (after a clean shutdown): a
/// kernel that stopped for a full disk validates nothing more, so a fresh one is opened. Returns
/// only if that failed.
fn restart() -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    tracing::warn!("restarting cairn: the kernel or the indexer had stopped for a full disk, and space is back");
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return anyhow::anyhow!("cannot restart: {e}"),
    };
    let err = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .exec();
    anyhow::anyhow!("cannot restart: {err}")
}

/// Saves the mempool for the next start (Core's `-persistmempool`), unless turned off.
fn save_mempool(node: &Node) {
    let Some(pool) = node
        .mempool
        .as_ref()
        .filter(|_| node.settings.mempool.persist)
    else {
        return;
    };
    let path = node.datadir.mempool_file();
    match pool.save(&path) {
        Ok(n) => tracing::info!("saved {n} mempool transactions to {}", path.display()),
        Err(e) => tracing::warn!("the mempool was not saved: {e}"),
    }
}

/// Prints where each service listens and how to try it.
fn tell_user(services: &Services, node: &Node) {
    if let Some(addr) = services.p2p.as_ref().and_then(|p| p.listen_addr) {
        println!("accepting peers on {addr}");
    }
    if let Some(http) = &services.http {
        println!(
            "HTTP filter server on {} (/filter/{{blockhash}}, /filterheaders?start=H&count=N)",
            http.addr
        );
    }
    let tip = tokio::task::block_in_place(|| node.validator.tip());
    tracing::info!(
        "cairn running on {}: tip {} at height {}; admin RPC on {} (cookie in {})",
        node::network_label(&node.settings),
        tip.hash,
        tip.height,
        services.admin.addr,
        node.datadir.cookie_file().display()
    );
    println!("cairn is running. `cairn --datadir {} --network {} status` shows its tips; Ctrl-C or `cairn stop` ends it.",
        node.settings.datadir.display(), node.settings.network);
    if let Some(server) = &services.electrum {
        let addr = server.addr;
        println!("Electrum server on {addr}. Try:");
        println!("  echo '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"blockchain.headers.subscribe\",\"params\":[]}}' | nc -q1 {} {}", addr.ip(), addr.port());
        let flag = match node.settings.network {
            cairn::types::Network::Mainnet => "",
            cairn::types::Network::Testnet4 => "--testnet4 ",
            cairn::types::Network::Signet => "--signet ",
            cairn::types::Network::Regtest => "--regtest ",
        };
        println!(
            "  electrum {flag}--oneserver --server {}:{}:t",
            addr.ip(),
            addr.port()
        );
        if let Some(sync) = tokio::task::block_in_place(|| node.validator.initial_download()) {
            println!(
                "It answers wallets once the initial download is done (now at height {} of {}).",
                sync.height, sync.headers
            );
        }
        if let Some(ws) = server.ws_addr {
            println!("Electrum WebSocket server on ws://{ws}");
        }
        if let (Some(tls), Some(identity)) = (server.tls_addr, &services.tls) {
            println!(
                "Electrum server over TLS on {tls} (certificate SHA-256 {}):",
                identity.fingerprint()
            );
            println!(
                "  electrum {flag}--oneserver --server {}:{}:s",
                tls.ip(),
                tls.port()
            );
        }
        if let Some(wss) = server.wss_addr {
            println!("Electrum WebSocket server over TLS on wss://{wss}");
        }
    }
}

/// Waits for `stop`, an interrupt or the indexer's end; passes SIGUSR1 on to the peers and
/// SIGHUP to the TLS listeners. When the
/// indexer or the kernel stopped while the disk is too full, keeps serving what is committed
/// until space is freed.
async fn run_until_stopped(
    services: &Services,
    signals: &Signals,
    node: &Node,
    runner: Option<&IndexRunner>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Ended {
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
    let mut waiting_for_space = false;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if signals.interrupted.load(Ordering::SeqCst) {
                    return Ended::Asked;
                }
                if signals.reload_requested.swap(false, Ordering::SeqCst) {
                    tokio::task::block_in_place(|| services.reload_tls());
                }
                if signals.sync_requested.swap(false, Ordering::SeqCst) {
                    tracing::debug!("SIGUSR1: asking peers for headers");
                    if let Some(p2p) = &services.p2p {
                        p2p.sync_now();
                    }
                }
                let fatal = node.validator.fatal();
                if fatal.is_none() && !runner.is_some_and(|r| r.is_finished()) {
                    continue;
                }
                let space = &node.space;
                if !waiting_for_space {
                    let low = tokio::task::block_in_place(|| space.is_low());
                    let failure = runner.and_then(IndexRunner::failure);
                    let what = match (&fatal, &failure) {
                        (Some(m), _) => format!("the kernel stopped: {m}"),
                        (None, Some(m)) => format!("the indexer stopped: {m}"),
                        (None, None) => "the indexer stopped".to_string(),
                    };
                    let disk_error = fatal.iter().chain(&failure).any(|m| SpaceWatch::is_disk_error(m));
                    if !low && !disk_error {
                        tracing::error!("{what}");
                        return Ended::Broken;
                    }
                    tracing::error!("{what}; the disk is full: cairn keeps answering from what it has and restarts by itself once space is freed");
                    waiting_for_space = true;
                } else if tokio::task::block_in_place(|| space.has_room_for_kernel()) {
                    return Ended::SpaceReturned;
                }
            }
            _ = stop.wait_for(|s| *s) => {
                tracing::info!("stop requested");
                return Ended::Asked;
            }
        }
    }
}

/// Shows initial-sync progress: headers, blocks, blocks/s and ETA; a bar on a terminal, a log
/// line every 10 s otherwise. Quiet once the tip has caught up with the best header.
async fn sync_progress(validator: Arc<Validator>) {
    let terminal = std::io::stderr().is_terminal();
    let bar = terminal.then(|| {
        let bar = indicatif::ProgressBar::new(0);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "sync {wide_bar} {pos}/{len} blocks, {msg} ETA {eta}",
        ) {
            bar.set_style(style);
        }
        bar
    });
    // The kernel's tips are read off the async workers: its lock is held while a block connects.
    let tips =
        || tokio::task::block_in_place(|| (validator.tip().height, validator.best_header().height));
    let mut last = (std::time::Instant::now(), tips().0);
    let mut last_log = std::time::Instant::now();
    let mut rate = 0.0f64;
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let (tip, best) = tips();
        let dt = last.0.elapsed().as_secs_f64();
        rate = 0.7 * rate + 0.3 * ((tip - last.1) as f64 / dt.max(1e-3));
        last = (std::time::Instant::now(), tip);
        if best <= tip {
            if let Some(bar) = &bar {
                bar.finish_and_clear();
            }
            continue;
        }
        let eta = if rate > 0.0 {
            (best - tip) as f64 / rate
        } else {
            f64::INFINITY
        };
        match &bar {
            Some(bar) => {
                bar.set_length(best as u64);
                bar.set_position(tip as u64);
                bar.set_message(format!("headers {best}, {rate:.0} blocks/s"));
            }
            None if last_log.elapsed() >= std::time::Duration::from_secs(10) => {
                last_log = std::time::Instant::now();
                tracing::info!(
                    "sync: headers {best}, blocks {tip}, {rate:.0} blocks/s, ETA {eta:.0} s"
                );
            }
            None => {}
        }
    }
}
