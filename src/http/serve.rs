//! Serving HTTP/1.1 on a listener with connection limits (in all, per host, and places held
//! for health checks), and building answers: shared by the filters, Esplora and status-page
//! listener and the metrics listener.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;

use crate::config::{CostLimits, HostLimits};
use crate::listen::{cost, HostGuard, HostShares, HostTable, WriteDeadline};

/// How long a client may take to send its request.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a write to a client may make no progress before its connection is closed (as the
/// Electrum server's default `electrum_write_timeout_secs`).
pub(super) const WRITE_TIMEOUT: Duration = Duration::from_secs(20);

/// Places held back beyond the listener's limit for health checks: a connection that gets one
/// is answered for `/health` only, once, so a load balancer's checks get through while every
/// other place is taken. Two per host (one closing while the next check comes), four per
/// subnet, at a time, so that an attacker who fills the listener cannot take them all from a
/// few addresses.
pub(super) const HEALTH_PLACES: usize = 16;
/// How long a connection on a health check's place may take to send its request.
const HEALTH_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// The places a listener gives out.
pub(super) struct Places {
    /// Connections at once, health checks' places aside.
    pub max_connections: usize,
    /// Per host (`None`: not counted, as for the metrics listener).
    pub hosts: Option<Arc<HostTable>>,
    /// The places held for health checks and their count per host (`None`: none held).
    pub health: Option<Arc<HostTable>>,
    /// What a host's requests may cost (`None`: not counted): a host at the hard limit has its
    /// new connections closed at accept; any other pays [`cost::CONNECTION`] for each.
    pub cost: Option<CostLimits>,
}

impl Places {
    /// The HTTP listener's: `max_connections`, `hosts` per host, [`HEALTH_PLACES`] more for
    /// health checks, and each host's requests held to `cost`.
    pub fn with_health(max_connections: usize, hosts: HostLimits, cost: CostLimits) -> Self {
        let checks = HostLimits {
            per_ip: 2,
            per_subnet: 4,
            exempt: hosts.exempt.clone(),
        };
        Places {
            max_connections,
            hosts: Some(HostTable::new(hosts, "HTTP")),
            health: Some(HostTable::new(checks, "HTTP health checks")),
            cost: Some(cost),
        }
    }
}

/// Which place a connection holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// One of `max_connections`: every request is answered.
    Any,
    /// One held back for health checks: only `/health` is answered.
    HealthOnly,
}

/// Accepts clients of `listener` (`what` names them in logs) for ever, at most
/// `max_connections` at once and as many per host as `hosts` allows (more are closed as they
/// connect, counted in `cairn_http_connections_refused_total`; so are those of a host at the
/// hard limit of its cost, when `places` counts it), with [`HEALTH_PLACES`] more held
/// for health checks when `places` says so, and serves each over HTTP/1.1 with `handle` (given
/// the request, the place and what the host's connections share): the request head must come
/// within [`REQUEST_TIMEOUT`] and fit 64 KiB, and a write that takes nothing for
/// [`WRITE_TIMEOUT`] ends the connection.
pub(super) async fn serve<H, F>(
    listener: TcpListener,
    what: &'static str,
    places: Places,
    handle: H,
) where
    H: Fn(Request<Incoming>, Place, Arc<HostShares>) -> F + Clone + Send + Sync + 'static,
    F: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let any = Arc::new(tokio::sync::Semaphore::new(places.max_connections));
    let held_back = places.health.as_ref().map_or(0, |_| HEALTH_PLACES);
    let health = Arc::new(tokio::sync::Semaphore::new(held_back));
    let refused = |reason: &str| {
        crate::metrics::metrics()
            .http_connections_refused
            .with_label_values(&[what, reason])
            .inc();
    };
    loop {
        let (stream, peer) = crate::listen::accept(&listener, what).await;
        let host = match places.hosts.as_ref().map(|hosts| hosts.admit(peer.ip())) {
            Some(Err(limit)) => {
                refused(limit.label());
                continue;
            }
            Some(Ok(host)) => Some(host),
            None => None,
        };
        if let (Some(host), Some(limits)) = (&host, &places.cost) {
            if !admits_for_cost(host, limits) {
                refused("cost");
                continue;
            }
        }
        let (permit, place, check) = match any.clone().try_acquire_owned() {
            Ok(permit) => (permit, Place::Any, None),
            Err(_) => {
                let check = places.health.as_ref().map(|t| t.admit(peer.ip()));
                match (check, health.clone().try_acquire_owned()) {
                    (Some(Ok(check)), Ok(permit)) => (permit, Place::HealthOnly, Some(check)),
                    _ => {
                        tracing::debug!("refusing {what} client {peer}: every place is taken");
                        refused("limit");
                        continue;
                    }
                }
            }
        };
        let handle = handle.clone();
        // What the host's connections share (the query pool's share among them).
        let shared = host.as_ref().map(HostGuard::shared).unwrap_or_default();
        tokio::spawn(async move {
            let _places = (permit, host, check);
            let service = hyper::service::service_fn(move |req| {
                let answered = handle(req, place, shared.clone());
                async move { Ok::<_, Infallible>(answered.await) }
            });
            let stream = WriteDeadline::new(stream, WRITE_TIMEOUT);
            let (head_within, keep_alive) = match place {
                Place::Any => (REQUEST_TIMEOUT, true),
                // One quick request, then the place is free again.
                Place::HealthOnly => (HEALTH_REQUEST_TIMEOUT, false),
            };
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(head_within)
                .keep_alive(keep_alive)
                .max_buf_size(64 * 1024)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!("{what} client {peer}: {e}");
            }
        });
    }
}

/// Whether `host` may connect, by its cost: not at the hard limit (ElectrumX closes such a
/// host's sessions; it pays nothing more for being refused); a host that may pays
/// [`cost::CONNECTION`], so one that reconnects in a loop pays for it.
fn admits_for_cost(host: &HostGuard, limits: &CostLimits) -> bool {
    let shared = host.shared();
    if shared.cost.verdict(limits) == cost::Verdict::Close {
        return false;
    }
    shared.cost.charge(cost::CONNECTION, limits);
    true
}

/// The answer on a health check's place to anything but `/health`: try again later, on a
/// connection of its own.
pub(super) fn busy() -> Response<Full<Bytes>> {
    let mut response = answer_with(
        StatusCode::SERVICE_UNAVAILABLE,
        "text/plain",
        "every connection place is taken; try again",
    );
    response.headers_mut().insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
    response
}

pub(super) fn with_cors(mut response: Response<Full<Bytes>>) -> Response<Full<Bytes>> {
    response.headers_mut().insert(
        hyper::header::ACCESS_CONTROL_ALLOW_ORIGIN,
        hyper::header::HeaderValue::from_static("*"),
    );
    response
}

/// An answer with `status` and a body of `content_type`: every answer of the HTTP listeners.
pub fn answer_with(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}
