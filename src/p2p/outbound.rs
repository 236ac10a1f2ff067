//! Automatic outbound connections, as Core's `ThreadOpenConnections`: the anchors of the last
//! run first, then addresses from the book, each in a network group no other automatic
//! outbound peer is in; once every slot is full, a feeler connection every two minutes on
//! average (`FEELER_INTERVAL`) tests an address of the new table, or the tried entry a
//! collision waits on, and hangs up after the handshake.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::addrbook::{self, internal_source, AddrBook};
use super::announce_timer::poisson;
use super::{seeds, Shared, MANAGER_TICK};
use crate::config::P2pConfig;

/// Core's `FEELER_INTERVAL`: the average wait between feeler connections.
const FEELER_INTERVAL: Duration = Duration::from_secs(120);

/// Keeps `max_outbound` connections to the anchors and to addresses from the book, filling
/// the book from the DNS seeds (then the fixed seeds) when it is empty, and sends feelers.
pub(super) async fn manage(shared: Arc<Shared>, config: P2pConfig, mut anchors: Vec<SocketAddr>) {
    let book = shared.ctx.book.clone();
    seed_if_empty(&book, &config).await;
    let feeling = Arc::new(AtomicBool::new(false));
    let mut next_feeler = Instant::now() + poisson(FEELER_INTERVAL);
    let mut tick = tokio::time::interval(MANAGER_TICK);
    loop {
        tick.tick().await;
        book.resolve_collisions();
        let mut exclude = shared.slots.snapshot();
        let groups: HashSet<Vec<u8>> = exclude.iter().map(|a| addrbook::group(a.ip())).collect();
        exclude.extend(shared.ctx.registry.list().into_iter().map(|p| p.addr));
        exclude.extend(config.addnode.iter().copied());
        exclude.extend(config.listen);
        let banned = |a: &SocketAddr| shared.bans.is_banned(a);
        if shared.slots.len() < config.max_outbound {
            let anchor = std::iter::from_fn(|| anchors.pop()).find(|a| {
                let group = addrbook::group(a.ip());
                !exclude.contains(a) && !banned(a) && (group == [0] || !groups.contains(&group))
            });
            // As Core: failures count once two groups are connected, so that a node that is
            // offline itself does not wear its book out.
            let count_failure = groups.len() >= config.max_outbound.saturating_sub(1).min(2);
            let picked = anchor.or_else(|| book.pick(&exclude, &groups, banned, count_failure));
            if let Some(addr) = picked {
                tokio::spawn(connect(shared.clone(), addr));
            }
        } else if Instant::now() >= next_feeler {
            next_feeler = Instant::now() + poisson(FEELER_INTERVAL);
            if !feeling.swap(true, Ordering::SeqCst) {
                match book.pick_feeler(&exclude, banned) {
                    Some(addr) => {
                        let (shared, feeling) = (shared.clone(), feeling.clone());
                        tokio::spawn(async move {
                            shared.feel(addr).await;
                            feeling.store(false, Ordering::SeqCst);
                        });
                    }
                    None => feeling.store(false, Ordering::SeqCst),
                }
            }
        }
    }
}

/// Runs one automatic outbound connection in a slot of its own.
async fn connect(shared: Arc<Shared>, addr: SocketAddr) {
    let Some(_slot) = shared.slots.take(addr) else {
        return;
    };
    shared.connect_and_run(addr, false).await;
}

/// Fills an empty book from the DNS seeds, then the fixed seeds; each seed's addresses are
/// filed under a source of its own (Core's internal addresses).
async fn seed_if_empty(book: &AddrBook, config: &P2pConfig) {
    let has_seeds = !seeds::dns_seeds(config.network, config.custom_signet).is_empty();
    if !has_seeds || !book.is_empty() {
        return;
    }
    if config.dns_seeds {
        let found = seeds::resolve_dns_seeds(config.network, config.custom_signet).await;
        let added: usize = found
            .into_iter()
            .map(|(seed, addrs)| book.add(addrs, internal_source(seed)))
            .sum();
        tracing::info!("DNS seeds gave {added} addresses");
    }
    if book.is_empty() {
        let fixed = seeds::fixed_seeds(config.network, config.custom_signet);
        tracing::info!("trying {} fixed seed addresses", fixed.len());
        book.add(seeds::as_known(fixed), internal_source("fixedseeds"));
    }
}
