//! Running a node: the consumer of its kernel events, its servers until it is told to stop, and
//! the sync progress display.

use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::Result;

use cairn::kernel::{KernelEvent, Validator};
use cairn::node::runner::IndexRunner;
use cairn::node::services::Services;
use cairn::node::{self, Node};
use cairn::notify::Notifier;

use super::signals::{signals, Signals};

/// Starts what consumes the kernel's events: the indexer thread when there is an index, else a
/// thread that only logs them. A serving node (`serving`) also loads its saved mempool.
pub fn start_consumer(node: &mut Node, notifier: &Notifier, serving: bool) -> Result<Option<IndexRunner>> {
    let Some(events) = node.events.take() else {
        return Ok(None);
    };
    match &node.index {
        Some(index) => Ok(Some(IndexRunner::spawn(
            index.clone(),
            node.validator.clone(),
            node.mempool.clone().map(|pool| (pool, (serving && node.settings.mempool.persist).then(|| node.datadir.mempool_file()))),
            events,
            notifier.clone(),
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
        let progress = services.p2p.as_ref().map(|_| tokio::spawn(sync_progress(node.validator.clone())));
        tell_user(&services, &node);
        run_until_stopped(&services, signals, runner.as_ref(), stop_rx).await;
        if let Some(task) = progress {
            task.abort();
        }
        services.stop().await;
        anyhow::Ok(())
    });
    let indexed = match runner {
        Some(runner) => runner.finish().map(drop).map_err(anyhow::Error::from),
        None => Ok(()),
    };
    save_mempool(&node);
    drop(rt);
    node.close();
    served?;
    indexed?;
    tracing::info!("cairn stopped");
    Ok(())
}

/// Saves the mempool for the next start (Core's `-persistmempool`), unless turned off.
fn save_mempool(node: &Node) {
    let Some(pool) = node.mempool.as_ref().filter(|_| node.settings.mempool.persist) else { return };
    let path = node.datadir.mempool_file();
    match cairn::mempool::persist::save(pool, &path) {
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
        println!("HTTP filter server on {} (/filter/{{blockhash}}, /filterheaders?start=H&count=N)", http.addr);
    }
    let tip = node.validator.tip();
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
        println!("  electrum --regtest --oneserver --server {}:{}:t", addr.ip(), addr.port());
        if let Some(ws) = server.ws_addr {
            println!("Electrum WebSocket server on ws://{ws}");
        }
    }
}

/// Waits for `stop`, an interrupt or the indexer's end; passes SIGUSR1 on to the peers.
async fn run_until_stopped(
    services: &Services,
    signals: &Signals,
    runner: Option<&IndexRunner>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if signals.interrupted.load(Ordering::SeqCst) {
                    return;
                }
                if signals.sync_requested.swap(false, Ordering::SeqCst) {
                    tracing::debug!("SIGUSR1: asking peers for headers");
                    if let Some(p2p) = &services.p2p {
                        p2p.sync_now();
                    }
                }
                if runner.is_some_and(|r| r.is_finished()) {
                    tracing::error!("the indexer stopped");
                    return;
                }
            }
            _ = stop.wait_for(|s| *s) => {
                tracing::info!("stop requested");
                return;
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
    let mut last = (std::time::Instant::now(), validator.tip().height);
    let mut last_log = std::time::Instant::now();
    let mut rate = 0.0f64;
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let (tip, best) = (validator.tip().height, validator.best_header().height);
        let dt = last.0.elapsed().as_secs_f64();
        rate = 0.7 * rate + 0.3 * ((tip - last.1) as f64 / dt.max(1e-3));
        last = (std::time::Instant::now(), tip);
        if best <= tip {
            if let Some(bar) = &bar {
                bar.finish_and_clear();
            }
            continue;
        }
        let eta = if rate > 0.0 { (best - tip) as f64 / rate } else { f64::INFINITY };
        match &bar {
            Some(bar) => {
                bar.set_length(best as u64);
                bar.set_position(tip as u64);
                bar.set_message(format!("headers {best}, {rate:.0} blocks/s"));
            }
            None if last_log.elapsed() >= std::time::Duration::from_secs(10) => {
                last_log = std::time::Instant::now();
                tracing::info!("sync: headers {best}, blocks {tip}, {rate:.0} blocks/s, ETA {eta:.0} s");
            }
            None => {}
        }
    }
}
