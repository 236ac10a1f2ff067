//! The HTTP server: the compact filters for light clients that cannot speak P2P (browsers),
//! `GET /filter/{blockhash}` and `GET /filterheaders?start=H&count=N`, and the Esplora REST
//! API ([`esplora`]) over the same index and the mempool; and, on a listener of its own,
//! Prometheus' `/metrics` ([`metrics`]). Every answer carries
//! `Access-Control-Allow-Origin: *`; answers are bounded; one bad request never stops the
//! others.

mod context;
pub mod esplora;
mod explorer;
pub mod metrics;
mod serve;
mod silent_payments;
pub mod status_page;

use std::net::SocketAddr;
use std::sync::Arc;

use bitcoin::hex::DisplayHex;
use bitcoin::BlockHash;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::config::{CostLimits, HostLimits};
use crate::view::{ChainView, CostMeter, FilterState};
use crate::work::cost::{self, Verdict};
use crate::work::{HostShares, WorkRefused};
use context::Query;
pub use context::{HttpContext, HttpError};
pub use serve::answer_with;
use serve::{busy, serve, with_cors, Place, Places, REQUEST_TIMEOUT};

/// Most filter headers one `/filterheaders` request may ask for (as P2P's getcfheaders).
pub const MAX_FILTER_HEADERS: u32 = 2000;
/// Largest request body (`POST /tx`: a transaction in hex; Esplora's limit).
pub const MAX_BODY_BYTES: usize = 1_000_000;

/// The running HTTP server.
pub struct HttpServer {
    /// Where it listens.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
    sampler: tokio::task::JoinHandle<()>,
}

impl HttpServer {
    /// Binds `addr` and serves the filter endpoints and the Esplora API from `ctx` to at most
    /// `max_connections` clients at once and as many per host as `hosts` allows (more are
    /// closed as they connect; a few more are answered for `/health` only); while the validator
    /// is in its initial download every request gets 503 and how far it is. Must run inside a
    /// tokio runtime.
    pub async fn start(
        addr: SocketAddr,
        ctx: HttpContext,
        max_connections: usize,
        hosts: HostLimits,
    ) -> Result<Self, HttpError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| HttpError::Listen { addr, source })?;
        let addr = listener.local_addr().unwrap_or(addr);
        tracing::info!("HTTP server (filters, Esplora API) on {addr}");
        let ctx = Arc::new(ctx);
        let sampler = tokio::spawn(take_samples(ctx.clone()));
        let places = Places::with_health(max_connections, hosts, ctx.cost);
        let task = tokio::spawn(serve(listener, "HTTP", places, move |req, place, host| {
            let ctx = ctx.clone();
            async move {
                let response = match place {
                    Place::HealthOnly if req.uri().path() != "/health" => busy(),
                    _ => answer_off_the_workers(ctx, req, host).await,
                };
                crate::metrics::metrics()
                    .http_requests
                    .with_label_values(&[response.status().as_str()])
                    .inc();
                with_cors(response)
            }
        }));
        Ok(HttpServer {
            addr,
            task,
            sampler,
        })
    }

    /// Stops accepting requests.
    pub fn stop(self) {
        self.task.abort();
        self.sampler.abort();
    }
}

/// Samples the node for the status page every [`status_page::SAMPLE_EVERY`].
async fn take_samples(ctx: Arc<HttpContext>) {
    let mut ticks = tokio::time::interval(status_page::SAMPLE_EVERY);
    loop {
        ticks.tick().await;
        let ctx = ctx.clone();
        if tokio::task::spawn_blocking(move || ctx.samples.take(&ctx.model))
            .await
            .is_err()
        {
            return;
        }
    }
}

fn reply(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    answer_with(status, "application/json", body.to_string())
}

fn error(status: StatusCode, message: impl std::fmt::Display) -> Response<Full<Bytes>> {
    reply(status, json!({ "error": message.to_string() }))
}

/// An Esplora failure as Esplora sends it: the status and a text body.
fn failure(esplora::Failure(status, message): esplora::Failure) -> Response<Full<Bytes>> {
    answer_with(status, "text/plain", message)
}

/// Reads the body (at most [`MAX_BODY_BYTES`], within [`REQUEST_TIMEOUT`]; `/health`'s is
/// never read), then answers in a slot of the query pool (`/health` on a blocking thread of its
/// own: it reads two tips, and must be answered when the pool is busy): on this task when the
/// answer is in memory ([`crate::work::WorkPool::run_inline`]: no disk read, one such job at a
/// time over the server), else on a blocking thread. A request that finds the pool's queue full gets 503
/// at once; one whose client hangs up leaves the queue, or stops at its next read. Its host's
/// cost decides first whether it runs at once, after a wait (above the soft limit) or not at
/// all ([`over_cost`]); once answered, what it read and the bytes it moved are charged to its
/// host ([`cost::units`]). `/health` is neither held up nor charged.
async fn answer_off_the_workers(
    ctx: Arc<HttpContext>,
    req: Request<Incoming>,
    host: Arc<HostShares>,
) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    if parts.uri.path() == "/health" {
        return match tokio::task::spawn_blocking(move || health(&ctx)).await {
            Ok(response) => response,
            Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
        };
    }
    let limits = ctx.cost;
    let level = || host.cost.level(limits.decay_per_sec);
    if let Verdict::Wait(pause) = host.cost.verdict(&limits) {
        crate::metrics::metrics().http_throttled.inc();
        tokio::time::sleep(pause).await;
    }
    // Asked again after the wait: the host's other requests may have been charged meanwhile.
    if host.cost.verdict(&limits) == Verdict::Close {
        return over_cost(&limits, level());
    }
    // Read only for a request that may run: a host at the hard limit sends no body for nothing.
    let body = match read_body(body).await {
        Ok(body) => body,
        Err(failed) => return failure(failed),
    };
    // A read whose slot is free now is tried on this task, from memory: no hand-off.
    if may_answer_inline(&parts) {
        let answer = || answer_charged(&ctx, &host, &parts, &body);
        let quiet = ctx.model.quiet();
        if let Some(response) = ctx.pool.try_answer_inline("http", &host, quiet, answer) {
            return response;
        }
    }
    let slot = match ctx.pool.queued_slot(&host).await {
        Ok(slot) => slot,
        Err(refused) => return work_refused(refused),
    };
    let pool = ctx.pool.clone();
    let answered = pool.run(slot, move || answer_charged(&ctx, &host, &parts, &body));
    match answered.await {
        Ok(response) => response,
        Err(refused) => work_refused(refused),
    }
}

/// The answer to one request other than `/health`; what it read and the bytes it moved are
/// charged to `host` (unless it was tried inline and refused: it is answered again).
fn answer_charged(
    ctx: &HttpContext,
    host: &HostShares,
    parts: &hyper::http::request::Parts,
    body: &[u8],
) -> Response<Full<Bytes>> {
    let meter = CostMeter::default();
    let response = answer_request(ctx, &Query::new(ctx, &meter, host), parts, body);
    let (requests, moved) = match crate::types::inline_refused() {
        // What the refused try read is paid; the request and its bytes, once answered.
        true => (0, 0),
        false => (1, head_bytes(parts) + body.len() + body_bytes(&response)),
    };
    host.cost
        .charge(cost::units(requests, meter.take(), moved), &ctx.cost);
    response
}

/// Whether a request may be tried on its connection's task ([`crate::types::try_inline`]): a
/// `GET`, but not the status page (it asks the file system for free space), nor the mempool's
/// lists and fee estimates (the whole pool each, counted in no rows), nor the explorer's pages
/// (block files, the mempool's projection).
fn may_answer_inline(parts: &hyper::http::request::Parts) -> bool {
    let path = parts.uri.path();
    parts.method == hyper::Method::GET
        && !matches!(path, "/" | "/api/status" | "/fee-estimates")
        && !path.starts_with("/mempool")
        && !path.starts_with("/explorer")
}

/// The answer to one request other than `/health`, its reads counted in `query`'s meter.
fn answer_request(
    ctx: &HttpContext,
    query: &Query,
    parts: &hyper::http::request::Parts,
    body: &[u8],
) -> Response<Full<Bytes>> {
    match ctx.model.validator().initial_download() {
        // The status page shows an initial download too.
        _ if matches!(parts.uri.path(), "/" | "/api/status") => {
            status_page(ctx, &parts.method, parts.uri.path())
        }
        Some(sync) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "server is syncing: height {} of {}",
                sync.height, sync.headers
            ),
        ),
        None => answer(
            query,
            &parts.method,
            parts.uri.path(),
            parts.uri.query(),
            body,
        ),
    }
}

/// The bytes of a request's head, near enough: its method, target and headers.
fn head_bytes(parts: &hyper::http::request::Parts) -> usize {
    let headers: usize = parts
        .headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    parts.method.as_str().len() + parts.uri.to_string().len() + headers
}

/// The bytes of an answer's body.
fn body_bytes(response: &Response<Full<Bytes>>) -> usize {
    let size = hyper::body::Body::size_hint(response.body());
    usize::try_from(size.exact().unwrap_or(size.lower())).unwrap_or(usize::MAX)
}

/// The answer to a request of a host whose cost is at the hard limit: 429, to be tried again
/// once its cost has decayed below it (`Retry-After`), and the connection closed, as ElectrumX
/// closes such a session.
fn over_cost(limits: &CostLimits, level: f64) -> Response<Full<Bytes>> {
    let secs = limits.retry_after(level);
    let mut response = error(
        StatusCode::TOO_MANY_REQUESTS,
        format!("excessive resource usage: this host's requests cost more than the server allows; try again in {secs} s"),
    );
    let headers = response.headers_mut();
    headers.insert(hyper::header::RETRY_AFTER, secs.into());
    headers.insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
    response
}

/// A request's body: at most [`MAX_BODY_BYTES`], within [`REQUEST_TIMEOUT`].
async fn read_body(body: Incoming) -> Result<Bytes, esplora::Failure> {
    match tokio::time::timeout(
        REQUEST_TIMEOUT,
        Limited::new(body, MAX_BODY_BYTES).collect(),
    )
    .await
    {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(esplora::Failure(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Request body too large".into(),
        )),
        Ok(Err(e)) => Err(esplora::Failure(StatusCode::BAD_REQUEST, e.to_string())),
        Err(_) => Err(esplora::Failure(
            StatusCode::REQUEST_TIMEOUT,
            "Request timeout".into(),
        )),
    }
}

/// The answer to a request the query pool did not take: 503, to be tried again in a second
/// (Core answers a full `-rpcworkqueue` the same way), counted in
/// `cairn_http_work_refused_total`; 500 for a job that failed (panicked).
fn work_refused(refused: WorkRefused) -> Response<Full<Bytes>> {
    if refused == WorkRefused::Failed {
        return error(StatusCode::INTERNAL_SERVER_ERROR, refused);
    }
    crate::metrics::metrics()
        .http_work_refused
        .with_label_values(&[refused.label()])
        .inc();
    let mut response = error(StatusCode::SERVICE_UNAVAILABLE, refused);
    response.headers_mut().insert(
        hyper::header::RETRY_AFTER,
        hyper::header::HeaderValue::from_static("1"),
    );
    response
}

/// `GET /`, the status page, and `GET /api/status`, what it draws.
fn status_page(ctx: &HttpContext, method: &Method, path: &str) -> Response<Full<Bytes>> {
    if method != Method::GET {
        return error(StatusCode::METHOD_NOT_ALLOWED, "only GET is served");
    }
    if path == "/api/status" {
        return reply(
            StatusCode::OK,
            status_page::api_status(&ctx.model, ctx.node_status.as_ref(), &ctx.samples),
        );
    }
    let mut response = answer_with(
        StatusCode::OK,
        "text/html; charset=utf-8",
        status_page::PAGE,
    );
    // Nothing from elsewhere: the page's own inline script and style, and /api/status.
    response.headers_mut().insert(
        hyper::header::CONTENT_SECURITY_POLICY,
        hyper::header::HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:",
        ),
    );
    response
}

/// `GET /health`, for load balancers: 200 only when the node is in sync ([`unhealthy`] finds
/// nothing), 503 with the reason otherwise. The body is JSON with the heights either way.
fn health(ctx: &HttpContext) -> Response<Full<Bytes>> {
    let kernel = ctx.model.validator().tip();
    let best = ctx.model.validator().best_header();
    let index = ctx.model.index().tip();
    let reason = unhealthy(
        ctx.model.validator().initial_download(),
        (&kernel, &best, ctx.health_max_blocks_behind),
        index,
    );
    let body = json!({
        "status": if reason.is_none() { "ok" } else { "unavailable" },
        "reason": reason,
        "kernel_height": kernel.height,
        "best_header_height": best.height,
        "index_height": index.map(|(height, _)| height),
    });
    reply(
        if reason.is_none() {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        body,
    )
}

/// Why a node should get no wallets, if it should not: still in its initial download, its
/// kernel more than `max_behind` blocks behind the best header it knows (`chain`: the kernel's
/// tip, the best header, `max_behind`), or its index not at the kernel's tip.
fn unhealthy(
    syncing: Option<crate::kernel::SyncProgress>,
    chain: (&crate::kernel::ChainTip, &crate::kernel::ChainTip, u32),
    index: Option<(u32, BlockHash)>,
) -> Option<String> {
    let (kernel, best, max_behind) = chain;
    if let Some(sync) = syncing {
        return Some(format!(
            "initial download: height {} of {}",
            sync.height, sync.headers
        ));
    }
    if best.height > kernel.height.saturating_add(i64::from(max_behind)) {
        return Some(format!(
            "the kernel is at height {}, the best header at {}",
            kernel.height, best.height
        ));
    }
    match index {
        Some((_, hash)) if hash == kernel.hash => None,
        _ => {
            let at = index.map_or(-1, |(height, _)| i64::from(height));
            Some(format!(
                "the index is at height {at}, the kernel at {}",
                kernel.height
            ))
        }
    }
}

/// Routes one request: silent-payment tweaks, the explorer's pages, the filter endpoints, else
/// the Esplora API.
fn answer(
    ctx: &Query,
    method: &Method,
    path: &str,
    query: Option<&str>,
    body: &[u8],
) -> Response<Full<Bytes>> {
    if let Some(rest) = path.strip_prefix("/silent-payments/") {
        return silent_payments::answer(&ctx.view(), method, rest, query);
    }
    if let Some(rest) = path.strip_prefix("/explorer") {
        if rest.is_empty() || rest.starts_with('/') {
            return explorer::answer(ctx, method, rest, query);
        }
    }
    let is_filter_path = path.starts_with("/filter/") || path == "/filterheaders";
    if !is_filter_path {
        return esplora::route(ctx, method, path, body).unwrap_or_else(failure);
    }
    if method != Method::GET {
        return error(StatusCode::METHOD_NOT_ALLOWED, "only GET is served");
    }
    filter_answer(&ctx.view(), path, query)
}

/// Answers one GET request for filters.
fn filter_answer(view: &ChainView, path: &str, query: Option<&str>) -> Response<Full<Bytes>> {
    match view.filter_state() {
        Ok(FilterState::Ready) => {}
        Ok(FilterState::Off) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "block filters are turned off (block_filters = false)",
            )
        }
        Ok(FilterState::Building) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "filters are still being built",
            )
        }
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
    if let Some(hash) = path.strip_prefix("/filter/") {
        return bip157_counted("cfilters", filter(view, hash));
    }
    if path == "/filterheaders" {
        return bip157_counted("cfheaders", filter_headers(view, query.unwrap_or("")));
    }
    error(
        StatusCode::NOT_FOUND,
        "unknown path: try /filter/{blockhash} or /filterheaders?start=H&count=N",
    )
}

/// `GET /filter/{blockhash}`: the block's basic filter and filter header, as bitcoind's
/// `getblockfilter` gives them, with the height.
/// `response` to a BIP157 request of `kind`, counted (once: not when it was tried inline and is
/// asked again).
fn bip157_counted(kind: &'static str, response: Response<Full<Bytes>>) -> Response<Full<Bytes>> {
    if !crate::types::inline_refused() {
        crate::metrics::metrics().bip157_request(kind, "http");
    }
    response
}

fn filter(view: &ChainView, hash_text: &str) -> Response<Full<Bytes>> {
    let Ok(hash) = hash_text.parse::<BlockHash>() else {
        return error(StatusCode::BAD_REQUEST, "not a block hash (64 hex digits)");
    };
    let Some(height) = view.height_of(&hash) else {
        return error(
            StatusCode::NOT_FOUND,
            format!("block {hash} is not in the indexed chain"),
        );
    };
    match view.block_filter(height) {
        Ok(Some(found)) => reply(
            StatusCode::OK,
            json!({
                "blockhash": hash.to_string(),
                "height": height,
                "filter": found.filter.to_lower_hex_string(),
                "header": found.header.to_string(),
            }),
        ),
        Ok(None) => error(StatusCode::NOT_FOUND, format!("no filter for block {hash}")),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

/// `GET /filterheaders?start=H&count=N`: the filter headers of heights `H..H+N` (fewer at the
/// tip), each with its block hash.
fn filter_headers(view: &ChainView, query: &str) -> Response<Full<Bytes>> {
    let (start, count) = match filter_headers_query(query) {
        Ok(asked) => asked,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let Some((tip, _)) = view.tip() else {
        return reply(StatusCode::OK, json!([]));
    };
    if start > tip {
        return error(
            StatusCode::NOT_FOUND,
            format!("start {start} is above the tip {tip}"),
        );
    }
    let headers = match view.filter_headers(start, count) {
        Ok(headers) => headers,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    let out: Vec<Value> = headers
        .into_iter()
        .map(|(height, hash, header)| json!({"height": height, "blockhash": hash.to_string(), "header": header.to_string()}))
        .collect();
    reply(StatusCode::OK, Value::Array(out))
}

/// `start` and `count` of a `/filterheaders` query, or what is wrong with it.
fn filter_headers_query(query: &str) -> Result<(u32, u32), String> {
    let mut start = None;
    let mut count = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let parsed = value.parse::<u32>().ok();
        match key {
            "start" => start = Some(parsed),
            "count" => count = Some(parsed),
            other => return Err(format!("unknown parameter {other:?}")),
        }
    }
    let (Some(Some(start)), Some(Some(count))) = (start, count) else {
        return Err("needs start and count, both non-negative integers".into());
    };
    if count == 0 || count > MAX_FILTER_HEADERS {
        return Err(format!("count must be 1 to {MAX_FILTER_HEADERS}"));
    }
    Ok((start, count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{ChainTip, SyncProgress};
    use bitcoin::hashes::Hash;

    fn tip(height: i64, byte: u8) -> ChainTip {
        ChainTip {
            height,
            hash: BlockHash::from_byte_array([byte; 32]),
        }
    }

    #[test]
    fn healthy_only_in_sync_with_the_index_at_the_kernels_tip() {
        let (kernel, hash) = (tip(100, 1), BlockHash::from_byte_array([1; 32]));
        assert_eq!(
            unhealthy(None, (&kernel, &tip(100, 1), 1), Some((100, hash))),
            None
        );
        // One block behind the best header is still in sync (it is being validated).
        assert_eq!(
            unhealthy(None, (&kernel, &tip(101, 2), 1), Some((100, hash))),
            None
        );
        // As far behind as `health_max_blocks_behind` allows, and no further.
        assert_eq!(
            unhealthy(None, (&kernel, &tip(106, 2), 6), Some((100, hash))),
            None
        );
        assert!(unhealthy(None, (&kernel, &tip(107, 2), 6), Some((100, hash))).is_some());
        assert!(unhealthy(None, (&kernel, &tip(101, 2), 0), Some((100, hash))).is_some());
        let reason = |syncing, best: ChainTip, index| {
            unhealthy(syncing, (&kernel, &best, 1), index).unwrap()
        };
        assert_eq!(
            reason(
                Some(SyncProgress {
                    height: 5,
                    headers: 30
                }),
                tip(30, 3),
                Some((5, hash))
            ),
            "initial download: height 5 of 30"
        );
        assert_eq!(
            reason(None, tip(102, 2), Some((100, hash))),
            "the kernel is at height 100, the best header at 102"
        );
        assert_eq!(
            reason(None, tip(100, 1), Some((99, BlockHash::all_zeros()))),
            "the index is at height 99, the kernel at 100"
        );
        // Same height, another block (the index has not followed a reorg yet).
        assert_eq!(
            reason(None, tip(100, 1), Some((100, BlockHash::all_zeros()))),
            "the index is at height 100, the kernel at 100"
        );
        assert_eq!(
            reason(None, tip(100, 1), None),
            "the index is at height -1, the kernel at 100"
        );
    }
}
