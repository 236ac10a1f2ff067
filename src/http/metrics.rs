//! `--metrics-addr`: `GET /metrics` in the Prometheus text format, on a listener of its own (so
//! it can stay on a private address while the API is public). Each scrape first sets the gauges
//! read from the node (tips, mempool, peers, store) through the `refresh` it was given.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;

use super::context::HttpError;

/// Most scrapers connected at once (Prometheus keeps one connection per target).
const MAX_CONNECTIONS: usize = 16;

/// Sets the gauges read from the node just before a scrape.
pub type Refresh = Box<dyn Fn() + Send + Sync>;

/// The running metrics listener.
pub struct MetricsServer {
    /// Where it listens.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl MetricsServer {
    /// Binds `addr` and answers `GET /metrics`. Must run inside a tokio runtime.
    pub async fn start(addr: SocketAddr, refresh: Refresh) -> Result<Self, HttpError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| HttpError::Listen { addr, source })?;
        let addr = listener.local_addr().unwrap_or(addr);
        tracing::info!("Prometheus metrics on http://{addr}/metrics");
        // One scrape at a time: the counters caught up from RocksDB's totals are read and
        // advanced in two steps.
        let refresh = Arc::new(Mutex::new(refresh));
        let places = super::serve::Places {
            max_connections: MAX_CONNECTIONS,
            hosts: None,
            health: None,
            cost: None,
            // Prometheus scrapes it directly, never through a balancer.
            balancers: crate::listen::proxy::Balancers::new(Vec::new()),
        };
        let task = tokio::spawn(super::serve::serve(
            listener,
            "metrics",
            places,
            move |req, _, _| answer(refresh.clone(), req),
        ));
        Ok(MetricsServer { addr, task })
    }

    /// Stops answering.
    pub fn stop(self) {
        self.task.abort();
    }
}

async fn answer(refresh: Arc<Mutex<Refresh>>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    if req.uri().path() != "/metrics" {
        return super::serve::answer_with(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: metrics are at /metrics",
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return super::serve::answer_with(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET is served",
        );
    }
    let scraped = tokio::task::spawn_blocking(move || {
        let refresh = refresh.lock().unwrap_or_else(PoisonError::into_inner);
        refresh();
        crate::metrics::metrics().encode()
    });
    match scraped.await {
        Ok(body) => super::serve::answer_with(StatusCode::OK, prometheus::TEXT_FORMAT, body),
        Err(e) => super::serve::answer_with(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            e.to_string(),
        ),
    }
}
