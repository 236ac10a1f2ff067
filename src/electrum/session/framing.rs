//! JSON-RPC's framing of a session: a line holding a request or a batch, each request's answer
//! as a line, a batch's answers written in pieces, or a stream written by a job of its own (a
//! long history, a tweak stream), and each answer's bytes held in the client's budget.

use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::Session;
use crate::electrum::backend::Backend;
use crate::electrum::cake_tweaks::TweaksJob;
use crate::electrum::counted::{busy, excessive, NoBudget, Room, SubscriptionShares, Taken};
use crate::electrum::request::method_label;
use crate::electrum::rpc::{error_value, Piece, Reply, RpcError, INVALID_REQUEST, PARSE_ERROR};
use crate::electrum::scripthash::HistoryJob;
use crate::view::Cost;
use crate::work::cost::Verdict;
use crate::work::{HostShares, WorkPool};

/// Total bytes of one batch's answers before the rest of the batch is refused.
const MAX_BATCH_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// What one request line gets back.
pub(crate) enum Answer {
    /// A whole answer (or a batch's answers), JSON text.
    Line(String),
    /// An answer written in pieces by a job of its own: a long history, or a tweak stream.
    Stream(StreamJob),
    /// A batch's answers, to be written as one line `[a,b,...]` in pieces, never copied into
    /// one string (transports that take pieces; others get [`Answer::Line`]).
    Batch(Vec<String>),
    /// Nothing: the answer budget had no room for it (the client holds its share unread, or
    /// the budget stayed full), so the session ends.
    NoRoom,
}

/// An answer the session streams: written by its job, on a thread of its own.
pub(crate) enum StreamJob {
    /// A long history ([`HistoryJob::run`]).
    History(HistoryJob),
    /// Silent-payment tweaks of a range of heights ([`TweaksJob::run`]).
    Tweaks(TweaksJob),
}

impl StreamJob {
    /// The request's id, its method's label, and when it came.
    pub(crate) fn request(&self) -> (&Value, &'static str, std::time::Instant) {
        match self {
            StreamJob::History(j) => (&j.id, j.method, j.started),
            StreamJob::Tweaks(j) => (&j.id, j.method, j.started),
        }
    }

    /// Writes the answer's pieces to `tx` (see each job's `run`); returns what it read.
    pub(crate) fn run(self, tx: mpsc::Sender<Piece>, pool: &WorkPool, host: &HostShares) -> Cost {
        match self {
            StreamJob::History(j) => j.run(tx, pool, host),
            StreamJob::Tweaks(j) => j.run(tx, pool, host),
        }
    }
}

impl Session {
    /// Answers one request object as JSON text (`None` for a notification, a request without
    /// an `id`, which is neither run nor answered).
    fn handle_request(&mut self, request: &Value, room: &mut dyn Room) -> Option<Answer> {
        let Some(obj) = request.as_object() else {
            let err = RpcError::new(INVALID_REQUEST, "a request must be a JSON object");
            return Some(Answer::Line(error_value(Value::Null, &err).to_string()));
        };
        let id = obj.get("id").cloned();
        let Some(method) = obj.get("method").and_then(Value::as_str) else {
            let err = RpcError::new(INVALID_REQUEST, "missing method");
            return Some(Answer::Line(
                error_value(id.unwrap_or(Value::Null), &err).to_string(),
            ));
        };
        let params = match crate::electrum::named_params::params_of(method, obj.get("params")) {
            Ok(params) => params,
            Err(err) => {
                return Some(Answer::Line(
                    error_value(id.unwrap_or(Value::Null), &err).to_string(),
                ))
            }
        };
        tracing::trace!("electrum request {method}");
        let (started, label) = (std::time::Instant::now(), method_label(method));
        let Some(id) = id else {
            // A notification gets no answer, so it does no work either (ElectrumX and Fulcrum
            // run none): counted as an error of its method, nothing else.
            crate::metrics::metrics().electrum_request(label, started.elapsed(), true);
            self.spent.requests += 1;
            return None;
        };
        let before = room.held();
        let id_len = id.to_string().len();
        let Some(result) = self.call(method, &params, id_len, room) else {
            crate::metrics::metrics().electrum_request(label, started.elapsed(), true);
            return Some(Answer::NoRoom);
        };
        // Tried inline and refused: the caller asks again in the pool, where the request is
        // counted; what this try read stays in the meter, charged with the answer.
        if crate::types::inline_refused() {
            return None;
        }
        let read = self.meter.take();
        self.spent.requests += 1;
        self.spent.read = self.spent.read.plus(read);
        crate::metrics::metrics().electrum_read(label, read.rows, read.bytes);
        // A history streamed in pieces is counted when its last piece is written (`stream`).
        let streamed = matches!(result, Ok(Reply::History(_) | Reply::Tweaks { .. }));
        if !streamed {
            crate::metrics::metrics().electrum_request(label, started.elapsed(), result.is_err());
        }
        let answered_id = id.clone();
        let answer = match result {
            Ok(Reply::Json(value)) => {
                Answer::Line(json!({"jsonrpc": "2.0", "id": id, "result": value}).to_string())
            }
            Ok(Reply::Text(mut text)) => {
                // In place: the text's own allocation, moved up (it has room, for a pong).
                let head = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":");
                text.insert_str(0, &head);
                text.push('}');
                Answer::Line(text)
            }
            Ok(Reply::History(sh)) => {
                let v17 = self.v17();
                Answer::Stream(StreamJob::History(HistoryJob {
                    backend: self.backend.clone(),
                    sh,
                    id,
                    v17,
                    method: label,
                    started,
                }))
            }
            Ok(Reply::Tweaks {
                height,
                count,
                historical,
            }) => Answer::Stream(StreamJob::Tweaks(TweaksJob {
                backend: self.backend.clone(),
                id,
                height,
                count,
                historical,
                method: label,
                started,
            })),
            Err(e) => Answer::Line(error_value(id, &e).to_string()),
        };
        // What the answer took beyond what was asked before it was built.
        if let Answer::Line(text) = &answer {
            let asked = room.held() - before;
            match room.take(text.len().saturating_sub(asked)) {
                Taken::Yes => {}
                Taken::OverShare => return Some(Answer::NoRoom),
                // Its text goes; a short error takes its place (its bytes are asked when it
                // is queued).
                Taken::Busy => {
                    return Some(Answer::Line(error_value(answered_id, &busy()).to_string()))
                }
            }
        }
        Some(answer)
    }

    /// Answers one line: a request or a batch, each answer's bytes held in `room` (an
    /// answer that finds none is [`Answer::NoRoom`]).
    pub(crate) fn handle_line(&mut self, line: &[u8], room: &mut dyn Room) -> Option<Answer> {
        let parsed: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                let err = RpcError::new(PARSE_ERROR, format!("invalid JSON: {e}"));
                return Some(Answer::Line(error_value(Value::Null, &err).to_string()));
            }
        };
        // The request's bytes are charged, and a single answer's (a batch's are charged item by
        // item, a streamed history's as it is written).
        let (answer, answered) = match parsed {
            // A batch is answered whole in the pool: inline, a refusal halfway would leave the
            // calls before it done.
            Value::Array(_) if crate::types::inline() => {
                crate::types::refuse_inline();
                return None;
            }
            Value::Array(batch) => {
                self.in_batch = true;
                let answer = self.handle_batch(&batch, room);
                self.in_batch = false;
                (answer, 0)
            }
            single => {
                let answer = self.handle_request(&single, room);
                let answered = match &answer {
                    Some(Answer::Line(text)) => text.len(),
                    _ => 0,
                };
                (answer, answered)
            }
        };
        if crate::types::inline_refused() {
            return None;
        }
        self.charge(line.len() + answered);
        answer
    }

    /// A batch's answers, built whole (nothing in it is streamed), each held in `room` as it is
    /// built.
    fn handle_batch(&mut self, batch: &[Value], room: &mut dyn Room) -> Option<Answer> {
        if batch.is_empty() {
            let err = RpcError::new(INVALID_REQUEST, "empty batch");
            return Some(Answer::Line(error_value(Value::Null, &err).to_string()));
        }
        if batch.len() > self.backend.config.max_batch {
            let err = RpcError::bad_request(format!(
                "batch of {} requests exceeds the limit of {}",
                batch.len(),
                self.backend.config.max_batch
            ));
            return Some(Answer::Line(error_value(Value::Null, &err).to_string()));
        }
        let mut answers: Vec<String> = Vec::new();
        let (mut bytes, mut over_cost) = (0usize, false);
        for request in batch {
            let id = || request.get("id").cloned().unwrap_or(Value::Null);
            let answer = if bytes > MAX_BATCH_RESPONSE_BYTES {
                let err = RpcError::bad_request(
                    "response too large: the batch's answers exceed the limit",
                );
                Some(error_value(id(), &err).to_string())
            } else if over_cost {
                Some(error_value(id(), &excessive()).to_string())
            } else {
                match self.handle_request(request, room) {
                    Some(Answer::Line(text)) => Some(text),
                    // Not reached: a session in a batch builds every answer whole.
                    Some(Answer::Stream(job)) => {
                        let err = RpcError::bad_request("not streamed in a batch");
                        Some(error_value(job.request().0.clone(), &err).to_string())
                    }
                    Some(Answer::NoRoom) => return Some(Answer::NoRoom),
                    // Not reached: only a batch answers in pieces.
                    Some(Answer::Batch(parts)) => Some(format!("[{}]", parts.join(","))),
                    None => None,
                }
            };
            // Each answer is charged as it is built: a batch pays as it goes, and what comes
            // after the hard limit is refused.
            let answered = answer.as_ref().map_or(0, String::len);
            over_cost = over_cost || self.charge(answered) == Verdict::Close;
            if let Some(a) = answer {
                bytes += a.len() + 1;
                answers.push(a);
            }
        }
        if answers.is_empty() {
            return None;
        }
        if self.streams {
            return Some(Answer::Batch(answers));
        }
        // Its brackets and commas are held too; each answer is freed as it is copied into the
        // line (whose pages fill as they are written), so the copy costs one answer at most.
        if room.take(answers.len() + 1) == Taken::OverShare {
            return Some(Answer::NoRoom);
        }
        let mut out = String::with_capacity(bytes + 1);
        out.push('[');
        for (i, a) in answers.into_iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&a);
        }
        out.push(']');
        Some(Answer::Line(out))
    }
}

/// One client's requests answered without a socket: the request parser and dispatcher a session
/// runs, for the request fuzzer (`fuzz/fuzz_targets/electrum_request.rs`).
pub struct Requests(Session);

impl Requests {
    /// A fresh client (no version negotiated, no subscriptions) of `backend`.
    pub fn new(backend: Arc<Backend>) -> Self {
        let shares = SubscriptionShares::new(crate::listen::Seat::detached(), Arc::default());
        Requests(Session::new(backend, false, shares))
    }

    /// The answer to one request line (a request or a batch), `None` when it owes none.
    pub fn answer(&mut self, line: &[u8]) -> Option<String> {
        match self.0.handle_line(line, &mut NoBudget)? {
            Answer::Line(text) => Some(text),
            Answer::Batch(parts) => Some(format!("[{}]", parts.join(","))),
            Answer::NoRoom => None,
            // A session without a socket builds every answer whole.
            Answer::Stream(job) => {
                let err = RpcError::bad_request("not streamed here");
                Some(error_value(job.request().0.clone(), &err).to_string())
            }
        }
    }
}
