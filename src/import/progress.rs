//! Import progress: a bar with height, blocks/s and ETA on a terminal, log lines otherwise.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// How often progress is logged when stderr is not a terminal.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Reports how far an import is. The length and position are in input bytes.
pub struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    last_log: Instant,
    length: u64,
    position: u64,
    height: i64,
    blocks: u64,
}

impl Progress {
    /// A bar on a terminal, periodic log lines otherwise; `quiet` shows neither.
    pub fn new(quiet: bool) -> Self {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(0);
            let style = ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {percent}% {msg} ETA {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar
        });
        let now = Instant::now();
        Progress {
            bar,
            started: now,
            last_log: now,
            length: 0,
            position: 0,
            height: 0,
            blocks: 0,
        }
    }

    /// Sets the total input size.
    pub fn set_length(&mut self, bytes: u64) {
        self.length = bytes;
        if let Some(bar) = &self.bar {
            bar.set_length(bytes);
        }
    }

    /// Sets how much input has been read.
    pub fn set_position(&mut self, bytes: u64) {
        self.position = bytes;
        if let Some(bar) = &self.bar {
            bar.set_position(bytes);
        }
    }

    /// Records a validated block and the tip height it led to.
    pub fn block(&mut self, height: i64, blocks: u64) {
        self.height = height;
        self.blocks = blocks;
        let rate = blocks as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
        if let Some(bar) = &self.bar {
            if blocks.is_multiple_of(16) {
                bar.set_message(format!("height {height} {rate:.0} blocks/s"));
            }
        } else if self.last_log.elapsed() >= LOG_INTERVAL {
            self.last_log = Instant::now();
            let pct = if self.length > 0 {
                100.0 * self.position as f64 / self.length as f64
            } else {
                0.0
            };
            tracing::info!("import: height {height}, {blocks} blocks, {rate:.0} blocks/s, {pct:.1}% of input read");
        }
    }

    /// Ends the bar.
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
