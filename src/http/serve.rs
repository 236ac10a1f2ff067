//! Serving HTTP/1.1 on a listener with connection limits (in all, per host, and places held
//! for health checks), and building answers: shared by the filters, Esplora and status-page
//! listener and the metrics listener.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use tokio::net::{TcpListener, TcpStream};

use crate::config::{CostLimits, HostLimits};
use crate::listen::proxy::{self, Balancers};
use crate::listen::{HostGuard, HostTable, Refused, WriteDeadline};
use crate::work::{cost, HostShares};

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
    /// Per host and group, holding `max_connections` in all: when full, the group holding the
    /// most gives its busiest host's youngest connection up for a newcomer (`None`: not
    /// counted, as for the metrics listener, whose total a semaphore holds).
    pub hosts: Option<Arc<HostTable>>,
    /// The places held for health checks and their count per host (`None`: none held).
    pub health: Option<Arc<HostTable>>,
    /// What a host's requests may cost (`None`: not counted): a host at the hard limit has its
    /// new connections closed at accept; any other pays [`cost::CONNECTION`] for each.
    pub cost: Option<CostLimits>,
    /// The balancers whose connections open with a PROXY header naming their client.
    pub balancers: Balancers,
}

impl Places {
    /// The HTTP listener's: `max_connections`, `hosts` per host, [`HEALTH_PLACES`] more for
    /// health checks, and each host's requests held to `cost`.
    pub fn with_health(max_connections: usize, hosts: HostLimits, cost: CostLimits) -> Self {
        let checks = HostLimits {
            per_ip: 2,
            per_subnet: 4,
            exempt: hosts.exempt.clone(),
            balancers: hosts.balancers.clone(),
        };
        Places {
            max_connections,
            balancers: Balancers::new(hosts.balancers.clone()),
            hosts: Some(HostTable::with_total(hosts, max_connections, "HTTP")),
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

/// What a connection holds while it is served: given back when dropped.
struct Held {
    /// Its place on a listener without a host table, or a health check's place.
    _permit: Option<tokio::sync::OwnedSemaphorePermit>,
    /// Its place in the host table (`None` on a listener without one).
    host: Option<HostGuard>,
    /// Its place among the health checks of its host.
    _check: Option<HostGuard>,
    place: Place,
}

/// The semaphores of a listener's places: every place of a listener without a host table, and
/// the health checks' places.
#[derive(Clone)]
struct Permits {
    any: Arc<tokio::sync::Semaphore>,
    health: Arc<tokio::sync::Semaphore>,
}

impl Places {
    /// A place for a client from `ip`, or why not (the metrics label): a host at the hard limit
    /// of its cost is refused before it could take anyone's place; one at its address's or
    /// subnet's limit, or whose own host holds the most of the group holding the most when the
    /// listener is full, may have a health check's place (so a load balancer's checks get
    /// through when every client comes from it).
    fn take(&self, ip: IpAddr, permits: &Permits) -> Result<Held, &'static str> {
        let Some(hosts) = &self.hosts else {
            let permit = permits.any.clone().try_acquire_owned();
            let permit = permit.map_err(|_| Refused::Full.label())?;
            return Ok(Held {
                _permit: Some(permit),
                host: None,
                _check: None,
                place: Place::Any,
            });
        };
        if let Some(limits) = &self.cost {
            if hosts.cost_of(ip).verdict(limits) == cost::Verdict::Close {
                return Err("cost");
            }
        }
        match hosts.admit(ip) {
            Ok(host) => {
                if let Some(limits) = &self.cost {
                    host.shared().cost.charge(cost::CONNECTION, limits);
                }
                Ok(Held {
                    _permit: None,
                    host: Some(host),
                    _check: None,
                    place: Place::Any,
                })
            }
            Err(limit) => {
                let check = self.health.as_ref().map(|t| t.admit(ip));
                match (check, permits.health.clone().try_acquire_owned()) {
                    (Some(Ok(check)), Ok(permit)) => Ok(Held {
                        _permit: Some(permit),
                        host: None,
                        _check: Some(check),
                        place: Place::HealthOnly,
                    }),
                    _ => Err(limit.label()),
                }
            }
        }
    }
}

/// Accepts clients of `listener` (`what` names them in logs) for ever, at most
/// `max_connections` at once and as many per host and group as `hosts` allows (when full, the
/// group holding the most gives a connection up for a newcomer of another; the rest are closed
/// as they connect, counted in `cairn_http_connections_refused_total`; so are those of a host
/// at the hard limit of its cost, when `places` counts it), with [`HEALTH_PLACES`] more held
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
    let permits = Permits {
        any: Arc::new(tokio::sync::Semaphore::new(places.max_connections)),
        health: Arc::new(tokio::sync::Semaphore::new(
            places.health.as_ref().map_or(0, |_| HEALTH_PLACES),
        )),
    };
    let places = Arc::new(places);
    loop {
        let (stream, peer) = crate::listen::accept(&listener, what).await;
        if !places.balancers.trusts(peer.ip()) {
            admit(stream, peer, &places, &permits, handle.clone(), what);
            continue;
        }
        // A balancer's connection: its client is known once its header is read.
        let (ours, permits, handle) = (places.clone(), permits.clone(), handle.clone());
        proxy::admit_after_header(&places.balancers, stream, peer, what, move |s, client| {
            admit(s, client, &ours, &permits, handle, what)
        });
    }
}

/// Gives the client at `peer` a place and serves it in a task of its own, or closes its
/// connection at once (counted by why) when no place is its.
fn admit<H, F>(
    stream: TcpStream,
    peer: SocketAddr,
    places: &Places,
    permits: &Permits,
    handle: H,
    what: &'static str,
) where
    H: Fn(Request<Incoming>, Place, Arc<HostShares>) -> F + Clone + Send + Sync + 'static,
    F: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let held = match places.take(peer.ip(), permits) {
        Ok(held) => held,
        Err(reason) => {
            tracing::debug!("refusing {what} client {peer}: {reason}");
            crate::metrics::metrics()
                .http_connections_refused
                .with_label_values(&[what, reason])
                .inc();
            return;
        }
    };
    let place = held.place;
    // What the host's connections share (the query pool's share among them).
    let shared = held
        .host
        .as_ref()
        .map(HostGuard::shared)
        .unwrap_or_default();
    let seat = held.host.as_ref().map(HostGuard::seat);
    let task = tokio::spawn(async move {
        let _held = held;
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
    // A connection whose place is taken back for a newcomer ends with its task.
    if let Some(seat) = seat {
        seat.running(task.abort_handle());
    }
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
