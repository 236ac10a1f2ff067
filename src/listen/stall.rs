//! A stream whose writes fail once they stop making progress: a client that reads nothing, or
//! next to nothing, is cut after the stall time however large its answer, and everything held
//! for it is freed.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// Bytes the peer must take within each stall time while writes wait (200 bytes a second at
/// the HTTP server's 20 s): one byte now and then does not keep a connection.
pub const MIN_PROGRESS: usize = 4 << 10;

/// `inner`, with every write (and flush and shutdown) failing with `TimedOut` once writes have
/// waited `stall` without the peer taking [`MIN_PROGRESS`] bytes (aiorpcX's `max_send_delay`,
/// with a floor on the rate). The clock starts when a write has to wait, and stops once the
/// peer has taken that much or a flush finds nothing left to send.
pub struct WriteDeadline<S> {
    inner: S,
    stall: Duration,
    /// While writes wait: the deadline, and the bytes taken since it was set.
    waiting: Option<(Pin<Box<Sleep>>, usize)>,
}

impl<S> WriteDeadline<S> {
    /// Wraps `inner`.
    pub fn new(inner: S, stall: Duration) -> Self {
        WriteDeadline {
            inner,
            stall,
            waiting: None,
        }
    }

    /// What a write that did not finish means: still waiting, or stalled past the deadline.
    fn pending<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let stall = self.stall;
        let (timer, _) = self
            .waiting
            .get_or_insert_with(|| (Box::pin(tokio::time::sleep(stall)), 0));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the peer took under {MIN_PROGRESS} bytes in {}s",
                    stall.as_secs()
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Counts what a write passed on: enough of it stops the clock.
    fn wrote(&mut self, result: io::Result<usize>) -> Poll<io::Result<usize>> {
        match (&result, &mut self.waiting) {
            (Ok(n), Some((_, taken))) => {
                *taken += n;
                if *taken >= MIN_PROGRESS {
                    self.waiting = None;
                }
            }
            (Err(_), _) => self.waiting = None,
            _ => {}
        }
        Poll::Ready(result)
    }

    /// Passes on a finished flush or shutdown: nothing is left waiting, so the clock stops.
    fn done(&mut self, result: io::Result<()>) -> Poll<io::Result<()>> {
        self.waiting = None;
        Poll::Ready(result)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_write(cx, buf) {
            Poll::Ready(result) => this.wrote(result),
            Poll::Pending => this.pending(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(result) => this.wrote(result),
            Poll::Pending => this.pending(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Ready(result) => this.done(result),
            Poll::Pending => this.pending(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_shutdown(cx) {
            Poll::Ready(result) => this.done(result),
            Poll::Pending => this.pending(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_write_nobody_reads_fails_after_the_stall_and_one_read_slowly_does_not() {
        // A pipe of 1 KiB: writes wait until the other end reads.
        let (near, far) = tokio::io::duplex(1024);
        let mut out = WriteDeadline::new(near, Duration::from_millis(200));
        let started = std::time::Instant::now();
        let err = out.write_all(&[7u8; 64 << 10]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(200));
        drop(far);

        // 512 bytes every 20 ms: 25 KiB a second, six times the floor, though the whole write
        // takes longer than the stall time.
        let (near, slow) = tokio::io::duplex(1024);
        let mut out = WriteDeadline::new(near, Duration::from_secs(1));
        let reader = tokio::spawn(read_at(slow, 512, Duration::from_millis(20), 64 << 10));
        out.write_all(&[7u8; 64 << 10]).await.unwrap();
        assert_eq!(reader.await.unwrap(), 64 << 10);
    }

    #[tokio::test]
    async fn a_trickle_under_the_floor_is_cut_and_idle_gaps_do_not_count() {
        // 256 bytes every 50 ms: 1 KiB per 200 ms, under the 4 KiB floor.
        let (near, trickle) = tokio::io::duplex(256);
        let mut out = WriteDeadline::new(near, Duration::from_millis(200));
        let reader = tokio::spawn(read_at(trickle, 256, Duration::from_millis(50), 64 << 10));
        let err = out.write_all(&[7u8; 64 << 10]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        reader.abort();

        // A short answer, a long silence (keep-alive), then another: the silence is no stall.
        let (near, mut far) = tokio::io::duplex(4096);
        let mut out = WriteDeadline::new(near, Duration::from_millis(200));
        out.write_all(&[1u8; 100]).await.unwrap();
        out.flush().await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        out.write_all(&[2u8; 100]).await.unwrap();
        out.flush().await.unwrap();
        use tokio::io::AsyncReadExt;
        let mut got = vec![0u8; 200];
        far.read_exact(&mut got).await.unwrap();
    }

    /// Reads `each` bytes every `every` until `total` arrived; returns the count.
    async fn read_at(
        mut from: tokio::io::DuplexStream,
        each: usize,
        every: Duration,
        total: usize,
    ) -> usize {
        use tokio::io::AsyncReadExt;
        let mut buf = vec![0u8; each];
        let mut got = 0;
        while got < total {
            tokio::time::sleep(every).await;
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        got
    }
}
