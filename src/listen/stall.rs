//! A stream whose writes fail once they stop making progress: a client that reads nothing is
//! cut after the stall time however large its answer, and everything held for it is freed.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `inner`, with every write (and flush and shutdown) failing with `TimedOut` once it has
/// waited `stall` without the peer taking a byte (aiorpcX's `max_send_delay`).
pub struct WriteDeadline<S> {
    inner: S,
    stall: Duration,
    /// Armed while a write waits; reset by any progress.
    waiting: Option<Pin<Box<Sleep>>>,
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
        let timer = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the peer took nothing for {}s", stall.as_secs()),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Passes on a finished write, disarming the timer.
    fn done<T>(&mut self, result: io::Result<T>) -> Poll<io::Result<T>> {
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
            Poll::Ready(result) => this.done(result),
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
            Poll::Ready(result) => this.done(result),
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

        let (near, mut slow) = tokio::io::duplex(1024);
        let mut out = WriteDeadline::new(near, Duration::from_millis(200));
        let reader = tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut buf = [0u8; 512];
            let mut got = 0;
            while got < 16 << 10 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                got += slow.read(&mut buf).await.unwrap();
            }
            got
        });
        // 16 KiB at 512 bytes per 20 ms takes 640 ms, over the stall time, but never stalls.
        out.write_all(&[7u8; 16 << 10]).await.unwrap();
        assert_eq!(reader.await.unwrap(), 16 << 10);
    }
}
