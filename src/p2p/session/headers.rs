//! A peer's `headers`, as Core's `ProcessHeadersMessage`: proof of work and continuity checked
//! first (a ban if broken), a chain already known to lead somewhere taken at once, and any
//! other only once its work reaches Core's anti-DoS threshold (`GetAntiDoSWorkThreshold`). A
//! full message of a chain below it starts a presync ([`HeadersSync`]) whose checked headers
//! reach the kernel later; a shorter one is ignored ("Ignoring low-work chain"), so cheap
//! headers are never stored.

use bitcoin::block::Header;

use super::super::error::PeerError;
use super::super::headers_sync::{check_pow, claimed_work, HeadersSync};
use super::{get_headers_from, Session, MAX_HEADERS, MAX_UNCONNECTING_HEADERS};

impl Session<'_> {
    /// Headers from the peer; a full message means it has more.
    pub(super) fn on_headers(&mut self, headers: Vec<Header>) -> Result<(), PeerError> {
        if headers.len() > MAX_HEADERS {
            return Err(PeerError::Misbehaving(format!(
                "{} headers in one message",
                headers.len()
            )));
        }
        let full = headers.len() == MAX_HEADERS;
        if headers.is_empty() {
            // As Core: an empty answer ends a presync in progress.
            self.headers_sync = None;
            self.getheaders_sent = None;
            return Ok(());
        }
        check_pow(&headers, self.ctx.rules.pow_limit)
            .map_err(|e| PeerError::Misbehaving(e.into()))?;
        let (headers, checked) = match self.continue_presync(&headers, full)? {
            Some(released) if released.is_empty() => return Ok(()),
            Some(released) => (released, true),
            None => (headers, false),
        };
        let v = &self.ctx.validator;
        let first = headers[0].prev_blockhash;
        let Some(start) = tokio::task::block_in_place(|| v.header_entry(&first)) else {
            return self.unconnecting(first);
        };
        self.unconnecting_headers = 0;
        self.getheaders_sent = None;
        let last = headers[headers.len() - 1].block_hash();
        let checked = checked || tokio::task::block_in_place(|| v.is_on_best_chains(&last));
        if !checked {
            let threshold = self
                .ctx
                .rules
                .anti_dos_threshold(&tokio::task::block_in_place(|| v.tip_entry()));
            if start.chain_work + claimed_work(&headers) < threshold {
                if full {
                    return self.start_presync(start, &headers, threshold);
                }
                tracing::debug!(
                    "peer {}: ignoring low-work chain (height {})",
                    self.id,
                    start.height + headers.len() as i64
                );
                return Ok(());
            }
        }
        self.submit(&headers)?;
        if full && self.headers_sync.is_none() {
            let locator = tokio::task::block_in_place(|| v.locator_from(&last));
            self.send_getheaders(get_headers_from(locator))?;
        }
        Ok(())
    }

    /// Headers whose first builds on an unknown one: a `getheaders` (Core's answer: the peer
    /// may be ahead of what it announced), until too many in a row, then a disconnect without
    /// a ban (Core 31 has no limit; cairn's keeps a peer from making it ask for ever).
    fn unconnecting(&mut self, prev: bitcoin::BlockHash) -> Result<(), PeerError> {
        self.unconnecting_headers += 1;
        if self.unconnecting_headers > MAX_UNCONNECTING_HEADERS {
            return Err(PeerError::Refused(format!(
                "{} headers messages in a row that do not connect",
                self.unconnecting_headers
            )));
        }
        tracing::debug!(
            "peer {}: headers from unknown {prev}; asking for headers",
            self.id
        );
        self.ask_headers()
    }

    /// Feeds a presync in progress (Core's `IsContinuationOfLowWorkHeadersSync`): `Some` with
    /// the headers it released (maybe none) when it took the message, `None` when there is no
    /// sync or it ended on this message (which then goes the ordinary way).
    fn continue_presync(
        &mut self,
        headers: &[Header],
        full: bool,
    ) -> Result<Option<Vec<Header>>, PeerError> {
        let Some(sync) = self.headers_sync.as_mut() else {
            return Ok(None);
        };
        let out = sync.process(headers, full);
        let next = out
            .request_more
            .then(|| (sync.locator_head(), sync.chain_start()));
        if sync.is_final() {
            self.headers_sync = None;
        }
        if out.success {
            self.unconnecting_headers = 0;
            self.getheaders_sent = None;
        }
        if let Some((head, start)) = next {
            self.ask_presync(head, start)?;
        }
        Ok(out.success.then_some(out.released))
    }

    /// Starts a presync of a low-work chain from `start` with its first full message.
    fn start_presync(
        &mut self,
        start: crate::kernel::HeaderEntry,
        headers: &[Header],
        threshold: bitcoin::pow::Work,
    ) -> Result<(), PeerError> {
        let v = &self.ctx.validator;
        let Some(start_header) = tokio::task::block_in_place(|| v.header(&start.hash)) else {
            return Ok(());
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut sync = HeadersSync::new(start, start_header, threshold, &self.ctx.rules, now);
        tracing::debug!(
            "peer {}: headers presync from height {} (low work)",
            self.id,
            start.height
        );
        let out = sync.process(headers, true);
        if out.request_more {
            self.ask_presync(sync.locator_head(), sync.chain_start())?;
        }
        if !sync.is_final() {
            self.headers_sync = Some(sync);
        }
        Ok(())
    }

    /// A `getheaders` for a presync: from `head`, then the chain start's locator.
    fn ask_presync(
        &mut self,
        head: bitcoin::BlockHash,
        start: bitcoin::BlockHash,
    ) -> Result<(), PeerError> {
        let v = &self.ctx.validator;
        let mut locator = vec![head];
        locator.extend(tokio::task::block_in_place(|| v.locator_from(&start)));
        self.send_getheaders(get_headers_from(locator))
    }

    /// Headers with enough work, to the kernel (each checked there too).
    fn submit(&mut self, headers: &[Header]) -> Result<(), PeerError> {
        let v = &self.ctx.validator;
        let outcome =
            tokio::task::block_in_place(|| headers.iter().try_for_each(|h| v.submit_header(h)));
        self.ctx.downloader.headers_changed();
        if let Err(e) = outcome {
            return Err(PeerError::Misbehaving(format!("bad header: {e}")));
        }
        if let Some(last) = headers.last() {
            let height = tokio::task::block_in_place(|| v.header_height(&last.block_hash()));
            self.best_known = self.best_known.max(height.unwrap_or(0));
        }
        Ok(())
    }
}
