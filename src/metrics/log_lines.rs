//! Counting the log lines written, by level, as a layer of the process's `tracing` subscriber:
//! `cairn_log_lines_total` is what an operator alarms on when something grows the log.

use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// A layer that counts every event that passes the log filter (`cairn_log_lines_total`).
#[derive(Debug, Default, Clone, Copy)]
pub struct LogLines;

impl<S: Subscriber> Layer<S> for LogLines {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let level = match *event.metadata().level() {
            tracing::Level::ERROR => "error",
            tracing::Level::WARN => "warn",
            tracing::Level::INFO => "info",
            tracing::Level::DEBUG => "debug",
            tracing::Level::TRACE => "trace",
        };
        super::metrics().log_lines.with_label_values(&[level]).inc();
    }
}
