//! The transport-independent part of a session: the loop that waits for a request, a tip
//! update or a scan's event, and what it does with each. Whatever it does with one runs
//! [`Source::alongside`] the source, so a WebSocket's pings are answered and its close seen
//! while the session is busy.

use std::net::SocketAddr;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

use super::source::{Incoming, Source};
use super::{answer_line, far_or, over_cost, start_scans, stream, End, SessionGauges};
use crate::electrum::backend::Backend;
use crate::electrum::counted::SubscriptionShares;
use crate::electrum::frigate_scan::{ScanEvent, ScanFailed};
use crate::electrum::outbox::{Outbox, SEND_TIMEOUT};
use crate::electrum::rpc::{error_value, RpcError};
use crate::electrum::session::{Answer, Session};
use crate::notify::TipUpdate;
use crate::work::{HostShares, Verdict, WorkPool};

/// Answers requests from `incoming` and sends answers and notifications to `out`, until the
/// client leaves, idles, sends an oversized request or does not read what it is sent.
/// `streams`: whether the transport takes a long answer in pieces.
pub(super) async fn serve(
    peer: SocketAddr,
    backend: Arc<Backend>,
    mut updates: broadcast::Receiver<TipUpdate>,
    mut incoming: impl Source,
    mut out: Outbox,
    streams: bool,
) -> End {
    tracing::debug!("electrum client {peer} connected");
    let idle = backend.config.idle_timeout;
    out.timeout = SEND_TIMEOUT.min(idle);
    let (scan_tx, mut scan_rx) = mpsc::channel::<ScanEvent>(2);
    let mut serving = Serving::new(peer, backend, out, streams, scan_tx);
    // Idle counts from the client's last request: notifications sent meanwhile do not count
    // (ElectrumX's `last_recv`, Fulcrum's `lastGood`).
    let idle_at = tokio::time::sleep_until(far_or(tokio::time::Instant::now(), idle));
    tokio::pin!(idle_at);
    loop {
        let step = tokio::select! {
            () = &mut idle_at => {
                tracing::debug!("electrum client {peer}: idle timeout");
                Err(End::Idle)
            }
            // The writer stopped (a write stalled, or the connection failed): nothing more can
            // reach the client.
            () = serving.out.tx.closed() => Err(End::Left),
            read = incoming.next() => {
                // Its answer written on this task unless more requests wait behind it.
                serving.out.write_directly(!incoming.has_more());
                let answered = incoming.alongside(serving.on_request(read)).await;
                idle_at.as_mut().reset(far_or(tokio::time::Instant::now(), idle));
                answered
            }
            update = updates.recv() => {
                serving.out.write_directly(true);
                incoming.alongside(serving.on_update(update)).await
            }
            Some(event) = scan_rx.recv() => {
                serving.out.write_directly(true);
                incoming.alongside(serving.on_scan_event(event)).await
            }
            Some(_) = serving.scans.join_next(), if !serving.scans.is_empty() => Ok(()),
        };
        if let Err(end) = step {
            return end;
        }
    }
}

/// What a session holds while it serves: the answering session, where answers go, its scans.
struct Serving {
    peer: SocketAddr,
    session: Session,
    out: Outbox,
    gauges: SessionGauges,
    pool: Arc<WorkPool>,
    host: Arc<HostShares>,
    backend: Arc<Backend>,
    /// Its silent-payment scans' tasks (dropped with the session), and where they tell it.
    scans: tokio::task::JoinSet<()>,
    scan_tx: mpsc::Sender<ScanEvent>,
}

impl Serving {
    fn new(
        peer: SocketAddr,
        backend: Arc<Backend>,
        out: Outbox,
        streams: bool,
        scan_tx: mpsc::Sender<ScanEvent>,
    ) -> Self {
        let subscriptions =
            SubscriptionShares::new(out.budget.seat.clone(), out.budget.subscriptions.clone());
        Serving {
            peer,
            session: Session::new(backend.clone(), streams, subscriptions),
            gauges: SessionGauges::open(out.transport),
            pool: backend.pool.clone(),
            host: out.budget.host.clone(),
            out,
            backend,
            scans: tokio::task::JoinSet::new(),
            scan_tx,
        }
    }

    /// Answers one request read (throttled as ElectrumX does a costly host); `Err` ends the
    /// session: the client left, sent a request over the limit, or does not read.
    async fn on_request(&mut self, read: Option<Incoming>) -> Result<(), End> {
        let peer = self.peer;
        let request = match read {
            None => return Err(End::Left),
            Some(Incoming::TooLong) => {
                let limit = self.backend.config.max_line_bytes;
                let err = RpcError::bad_request(format!("request line longer than {limit} bytes"));
                self.out
                    .send(error_value(Value::Null, &err).to_string())
                    .await;
                crate::outsider_log!(
                    info,
                    "electrum client {peer}: request over {limit} bytes, disconnecting"
                );
                return Err(End::TooLong);
            }
            Some(Incoming::PingFlood) => {
                crate::outsider_log!(info, "electrum client {peer}: WebSocket pings faster than one a second; disconnecting");
                return Err(End::Pings);
            }
            Some(Incoming::Request(request)) => request,
        };
        match self.host.cost.verdict(&self.backend.config.cost) {
            Verdict::Go => {}
            Verdict::Wait(pause) => {
                crate::metrics::metrics().electrum_throttled.inc();
                tokio::time::sleep(pause).await;
            }
            Verdict::Close => return Err(over_cost(peer, &self.out).await),
        }
        let inline = self.backend.model.quiet();
        let (session, pool, host, out) = (&mut self.session, &self.pool, &self.host, &self.out);
        let Some((answer, held)) = answer_line(session, &request, pool, host, out, inline).await
        else {
            return Err(End::Left);
        };
        self.gauges.subscriptions(self.session.subscription_count());
        let sent = match answer {
            None => true,
            Some(Answer::Line(text)) => self.out.send_held(text, held).await,
            Some(Answer::Batch(parts)) => self.out.send_batch(parts, held).await,
            Some(Answer::Stream(job)) => stream(job, &self.out, &self.pool).await,
            Some(Answer::NoRoom) => false,
        };
        if !sent {
            crate::outsider_log!(
                info,
                "electrum client {peer} does not read its answers; disconnecting"
            );
            return Err(End::NotReading);
        }
        self.start_scans();
        Ok(())
    }

    /// Tells the client what a tip update changed for its subscriptions (statuses computed in
    /// the query pool, in the host's turn; a new tip alone at once).
    async fn on_update(
        &mut self,
        update: Result<TipUpdate, broadcast::error::RecvError>,
    ) -> Result<(), End> {
        let update = match update {
            Ok(u) => Some(u),
            Err(broadcast::error::RecvError::Lagged(_)) => None,
            Err(broadcast::error::RecvError::Closed) => return Err(End::Left),
        };
        if !self.session.cares_about(update.as_ref()) {
            return Ok(());
        }
        let notes = match self.session.must_read_for(update.as_ref()) {
            true => {
                let Ok(slot) = self.pool.slot(&self.host).await else {
                    return Err(End::Left);
                };
                let session = &mut self.session;
                self.pool
                    .run_here(slot, || session.on_update(update.as_ref()))
            }
            false => self.session.on_update(update.as_ref()),
        };
        let sent = notes.iter().map(String::len).sum();
        if self.session.charge(sent) == Verdict::Close {
            return Err(over_cost(self.peer, &self.out).await);
        }
        if !self.out.send_all(notes).await {
            let peer = self.peer;
            crate::outsider_log!(
                info,
                "electrum client {peer} does not read its notifications; disconnecting"
            );
            return Err(End::NotReading);
        }
        self.start_scans();
        Ok(())
    }

    /// Passes on what a scan found (charged by the scan as it made it), or takes note that it
    /// ended.
    async fn on_scan_event(&mut self, event: ScanEvent) -> Result<(), End> {
        let peer = self.peer;
        match event {
            ScanEvent::Note {
                address,
                generation,
                line,
            } => {
                if self.session.scan_is_current(&address, generation) && !self.out.send(line).await
                {
                    crate::outsider_log!(info, "electrum client {peer} does not read its scan's notifications; disconnecting");
                    return Err(End::NotReading);
                }
            }
            ScanEvent::Ended {
                address,
                generation,
                scanned,
                told,
                failed,
            } => {
                self.session.scan_ended(&address, generation, scanned, told);
                match failed {
                    None => {}
                    Some(ScanFailed::Cost) => return Err(over_cost(peer, &self.out).await),
                    // Its wallet cannot be told the scan is complete: it reconnects.
                    Some(ScanFailed::Broken) => {
                        crate::outsider_log!(
                            warn,
                            "electrum client {peer}: a silent-payment scan failed; disconnecting"
                        );
                        return Err(End::Left);
                    }
                }
                self.start_scans();
            }
        }
        Ok(())
    }

    /// Starts the scans the session's last request or update asked for.
    fn start_scans(&mut self) {
        let jobs = self.session.take_scans();
        start_scans(&mut self.scans, jobs, &self.scan_tx, &self.pool, &self.host);
    }
}
