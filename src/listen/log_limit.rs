//! Log lines an outsider can cause, each kind printed at most once per [`EVERY`] with a count of
//! the like lines suppressed since: a client or peer that repeats what earns a line (a refusal, a
//! disconnection for its cost, an oversized request) from one host or a thousand grows the log
//! by a line every few seconds, not a line each time (as Fulcrum limits its per-IP warnings,
//! `kMaxClientsPerIPWarningRateLimitSecs`). What an outsider sends is printed through
//! [`sanitized`] only.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How often one kind of line may be printed.
pub const EVERY: Duration = Duration::from_secs(5);

/// Most characters of outsider-given text printed in a line.
pub const MAX_SHOWN: usize = 256;

/// One kind of line (one call site of [`outsider_log!`](crate::outsider_log)): when it was last
/// printed and how many were suppressed since.
#[derive(Debug)]
pub struct LimitedLine(Mutex<(Option<Instant>, u64)>);

impl LimitedLine {
    /// A kind not printed yet.
    pub const fn new() -> Self {
        LimitedLine(Mutex::new((None, 0)))
    }

    /// Whether a line of this kind may be printed now, at `now`: `Some` with the count of lines
    /// suppressed since the last one, or `None` (counted as suppressed).
    pub fn admit(&self, now: Instant) -> Option<u64> {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (last, suppressed) = &mut *state;
        if last.is_some_and(|at| now.saturating_duration_since(at) < EVERY) {
            *suppressed += 1;
            crate::metrics::metrics().log_suppressed.inc();
            return None;
        }
        *last = Some(now);
        Some(std::mem::take(suppressed))
    }
}

impl Default for LimitedLine {
    fn default() -> Self {
        LimitedLine::new()
    }
}

/// Outsider-given text as it may be printed (Core's `SanitizeString` with `SAFE_CHARS_DEFAULT`):
/// letters, digits and ` .,;-_/:?@()` kept, anything else dropped, at most [`MAX_SHOWN`]
/// characters; so a user agent or a request cannot forge log lines or terminal escapes.
pub fn sanitized(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii_alphanumeric() || " .,;-_/:?@()".contains(*c))
        .take(MAX_SHOWN)
        .collect()
}

/// Logs at `level` (`info`, `warn`, …) a line an outsider can cause, at most once per
/// [`EVERY`] for this call site, with how many like lines were suppressed since the last.
#[macro_export]
macro_rules! outsider_log {
    ($level:ident, $($arg:tt)+) => {{
        static LINE: $crate::listen::LimitedLine = $crate::listen::LimitedLine::new();
        match LINE.admit(::std::time::Instant::now()) {
            Some(0) => ::tracing::$level!($($arg)+),
            Some(n) => ::tracing::$level!(
                "{} ({n} more like it in the last {}s not shown)",
                format_args!($($arg)+),
                $crate::listen::log_limit::EVERY.as_secs()
            ),
            None => {}
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_window_and_the_rest_counted() {
        let line = LimitedLine::new();
        let t0 = Instant::now();
        assert_eq!(line.admit(t0), Some(0));
        for i in 1..=1_000 {
            assert_eq!(line.admit(t0 + Duration::from_millis(i)), None);
        }
        assert_eq!(line.admit(t0 + EVERY), Some(1_000));
        assert_eq!(line.admit(t0 + EVERY + Duration::from_secs(1)), None);
        assert_eq!(line.admit(t0 + 2 * EVERY), Some(1));
    }

    #[test]
    fn outsider_text_keeps_core_safe_characters_only() {
        assert_eq!(
            sanitized("/Satoshi:31.0.0/\n[ERROR] forged\x1b[31m"),
            "/Satoshi:31.0.0/ERROR forged31m"
        );
        assert_eq!(sanitized(&"a".repeat(10_000)).len(), MAX_SHOWN);
    }
}
