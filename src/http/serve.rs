//! Serving HTTP/1.1 on a listener with a connection limit, and building answers: shared by the
//! filters, Esplora and status-page listener and the metrics listener.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;

/// How long a client may take to send its request.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Accepts clients of `listener` (`what` names them in logs) for ever, at most
/// `max_connections` at once (more are closed as they connect), and serves each over HTTP/1.1
/// with `handle`: the request head must come within [`REQUEST_TIMEOUT`] and fit 64 KiB.
pub(super) async fn serve<H, F>(
    listener: TcpListener,
    what: &'static str,
    max_connections: usize,
    handle: H,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let places = Arc::new(tokio::sync::Semaphore::new(max_connections));
    loop {
        let (stream, peer) = crate::listen::accept(&listener, what).await;
        let Ok(place) = places.clone().try_acquire_owned() else {
            tracing::debug!("refusing {what} client {peer}: {max_connections} connections already");
            continue;
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let _place = place;
            let service = hyper::service::service_fn(move |req| {
                let answered = handle(req);
                async move { Ok::<_, Infallible>(answered.await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(REQUEST_TIMEOUT)
                .max_buf_size(64 * 1024)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!("{what} client {peer}: {e}");
            }
        });
    }
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
