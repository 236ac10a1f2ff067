//! The servers of a running node, wired to its index, mempool and validator: Electrum and HTTP
//! over the index, the P2P side, and the admin RPC. Started and stopped together.

use std::sync::Arc;

use tokio::sync::watch;

use super::snapshot::Snapshotter;
use super::Node;
use crate::admin::{AdminContext, AdminError, AdminServer, DiskStatus, Status, TakeSnapshot};
use crate::config::P2pConfig;
use crate::electrum::{Backend, ElectrumServer, ListenError};
use crate::http::metrics::MetricsServer;
use crate::http::{HttpContext, HttpError, HttpServer};
use crate::notify::Notifier;
use crate::p2p::{MempoolAccess, P2p, P2pError};
use crate::tls::{Tls, TlsError, TlsFiles};
use crate::view::{CacheSettings, ReadModel};
use crate::work::WorkPool;

/// A server that could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The Electrum server.
    #[error(transparent)]
    Electrum(#[from] ListenError),
    /// The P2P side.
    #[error(transparent)]
    P2p(#[from] P2pError),
    /// The HTTP server.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The admin RPC.
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// The TLS certificate or key.
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
}

/// The running servers of a node.
pub struct Services {
    /// The admin RPC.
    pub admin: AdminServer,
    /// The Electrum server, when the node has an index.
    pub electrum: Option<ElectrumServer>,
    /// The P2P side, when it has peers to reach or a listener.
    pub p2p: Option<P2p>,
    /// The HTTP server, when the node has an index and `http_addr` is set.
    pub http: Option<HttpServer>,
    /// The certificate the TLS listeners present, when there are any.
    pub tls: Option<Arc<Tls>>,
    /// Prometheus' `/metrics`, when `metrics_addr` is set.
    pub metrics: Option<MetricsServer>,
    /// The pool Electrum's and HTTP's answers are built in.
    pub pool: Arc<WorkPool>,
}

impl Services {
    /// Starts what the settings ask for: Electrum and HTTP over the index, the P2P side, and
    /// last the admin RPC (its cookie file tells scripts that the node is up).
    pub async fn start(
        node: &Node,
        notifier: &Notifier,
        stop: watch::Sender<bool>,
    ) -> Result<Self, ServeError> {
        let settings = &node.settings;
        let tls = match &node.index {
            Some(_) => tls_identity(node)?,
            None => None,
        };
        // One read model for every server: their caches are one.
        let model = node.index.as_ref().map(|index| {
            let cache = CacheSettings {
                status_from: settings.electrum.cache_status_from,
                history_from: settings.electrum.cache_history_from,
            };
            Arc::new(ReadModel::new(
                index.clone(),
                node.validator.clone(),
                node.mempool.clone(),
                cache,
            ))
        });
        let pool = WorkPool::new(settings.query_threads, settings.http_work_queue);
        let electrum = match &model {
            Some(model) => {
                let backend = Arc::new(Backend {
                    model: model.clone(),
                    notifier: notifier.clone(),
                    config: settings.electrum.clone(),
                    pool: pool.clone(),
                    verdicts: Default::default(),
                });
                Some(ElectrumServer::start(backend, tls.clone()).await?)
            }
            None => None,
        };
        let p2p = match settings.p2p.enabled() {
            true => {
                let mempool = match (&node.index, &node.mempool) {
                    (Some(index), Some(mempool)) => Some(MempoolAccess {
                        index: index.clone(),
                        mempool: mempool.clone(),
                        notifier: notifier.clone(),
                    }),
                    _ => None,
                };
                let config = P2pConfig {
                    addrbook_file: Some(node.datadir.addrbook_file()),
                    ..settings.p2p.clone()
                };
                Some(
                    P2p::start(
                        config,
                        node.validator.clone(),
                        mempool,
                        Some(node.space.clone()),
                    )
                    .await?,
                )
            }
            false => None,
        };
        let http = match (&model, settings.http_addr) {
            (Some(model), Some(addr)) => {
                let (status, details) = (
                    node_status(node, p2p.as_ref()),
                    settings.status_page_details,
                );
                let ctx = HttpContext {
                    model: model.clone(),
                    notifier: notifier.clone(),
                    node_status: Some(Box::new(move || {
                        crate::http::status_page::public(
                            serde_json::to_value(status()).unwrap_or_default(),
                            details,
                        )
                    })),
                    samples: Default::default(),
                    pool: pool.clone(),
                    cost: settings.http_cost,
                    verdicts: Default::default(),
                    health_max_blocks_behind: settings.health_max_blocks_behind,
                };
                Some(
                    HttpServer::start(
                        addr,
                        ctx,
                        settings.http_max_connections,
                        settings.http_hosts.clone(),
                    )
                    .await?,
                )
            }
            _ => None,
        };
        let metrics = match settings.metrics_addr {
            Some(addr) => {
                Some(MetricsServer::start(addr, super::gauges::refresh(node, p2p.as_ref())).await?)
            }
            None => None,
        };
        let admin = AdminServer::start(
            settings.admin_addr,
            &node.datadir,
            admin_context(node, p2p.as_ref(), stop),
        )
        .await?;
        Ok(Services {
            admin,
            electrum,
            p2p,
            http,
            tls,
            metrics,
            pool,
        })
    }

    /// Re-reads the TLS certificate and key (SIGHUP): new clients get the new pair, connected
    /// ones keep theirs; a pair that does not load is logged and the old one stays.
    pub fn reload_tls(&self) {
        let Some(tls) = &self.tls else { return };
        match tls.reload() {
            Ok(fingerprint) => tracing::info!(
                "TLS certificate reloaded from {}: SHA-256 fingerprint {fingerprint}",
                tls.files().cert.display()
            ),
            Err(e) => {
                tracing::error!("TLS certificate not reloaded, the previous one stays in use: {e}")
            }
        }
    }

    /// Stops every server; the admin RPC last, removing its cookie file. Query work still
    /// running stops at its next read.
    pub async fn stop(self) {
        self.pool.close();
        if let Some(server) = self.electrum {
            server.stop();
        }
        if let Some(p2p) = self.p2p {
            p2p.stop();
        }
        if let Some(http) = self.http {
            http.stop();
        }
        if let Some(metrics) = self.metrics {
            metrics.stop();
        }
        self.admin.stop().await;
    }
}

/// The TLS identity, when a TLS listener is configured: the operator's pair, or the data dir's
/// self-signed one (made now if missing). Its fingerprint is logged, for wallets that pin it.
fn tls_identity(node: &Node) -> Result<Option<Arc<Tls>>, TlsError> {
    let electrum = &node.settings.electrum;
    if electrum.tls_addr.is_none() && electrum.wss_addr.is_none() {
        return Ok(None);
    }
    let files = match &electrum.tls_files {
        Some((cert, key)) => TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        },
        None => TlsFiles::self_signed(&node.datadir)?,
    };
    let tls = Tls::open(files)?;
    tracing::info!(
        "TLS certificate {}: SHA-256 fingerprint {}",
        tls.files().cert.display(),
        tls.fingerprint()
    );
    Ok(Some(Arc::new(tls)))
}

/// What the admin RPC answers from: the node's status, read when asked, and the stop signal.
fn admin_context(node: &Node, p2p: Option<&P2p>, stop: watch::Sender<bool>) -> AdminContext {
    let snapshot = node.index.as_ref().map(|index| {
        let save_book = p2p
            .map(|p| Box::new(p.book_saver(node.settings.magic())) as super::snapshot::BookSaver);
        let snapshotter = Snapshotter::new(node, index.clone(), save_book, stop.subscribe());
        Box::new(move |dir: &std::path::Path| {
            let report = snapshotter.take(dir).map_err(|e| {
                tracing::warn!("snapshot into {} failed: {e}", dir.display());
                e.to_string()
            })?;
            serde_json::to_value(report).map_err(|e| e.to_string())
        }) as TakeSnapshot
    });
    AdminContext {
        status: Box::new(node_status(node, p2p)),
        snapshot,
        stop,
    }
}

/// The running node's status (`cairn status --json`), read when called: for the admin RPC and
/// the status page.
fn node_status(node: &Node, p2p: Option<&P2p>) -> impl Fn() -> Status + Send + Sync + 'static {
    let source = node.status_source();
    let p2p_status = p2p.map(|p| p.status_source());
    let space = node.space.clone();
    move || Status {
        running: true,
        p2p: p2p_status.as_ref().map(|f| f()),
        disk: Some(DiskStatus {
            free_mb: space.least_free() >> 20,
            min_free_mb: space.min_free() >> 20,
            low: space.is_low(),
        }),
        ..source.read()
    }
}
