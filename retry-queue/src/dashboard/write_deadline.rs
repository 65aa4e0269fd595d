//! A time limit on writing an answer: [`WriteDeadline`] wraps a connection's socket and fails
//! a write (or flush) that has made no progress for [`Limits::write_timeout`](super::server::Limits)
//! with `TimedOut`, which ends the connection and frees its slot. Without it a client that
//! never reads (a small receive window, answers pipelined) holds its connection for ever:
//! hyper's own timeouts cover reading a request's headers only.
//!
//! The limit is on a stall, not on the whole answer: a client that keeps reading, however
//! slowly, is served (its address's [share](super::shares) bounds how many such connections it
//! holds).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// A socket whose writes fail after stalling for `limit` (see the [module docs](self)).
#[derive(Debug)]
pub(crate) struct WriteDeadline<S> {
    inner: S,
    limit: Duration,
    /// Set while a write waits: when it fires, the write fails.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteDeadline<S> {
    /// `inner`, its writes limited to stalls of `limit`.
    pub(crate) fn new(inner: S, limit: Duration) -> WriteDeadline<S> {
        WriteDeadline {
            inner,
            limit,
            stalled: None,
        }
    }

    /// What a write that returned `poll` means: progress clears the timer, a wait starts it
    /// (once) and fails when it fires.
    fn judge<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let limit = self.limit;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        ready!(timer.as_mut().poll(cx));
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the client read nothing of its answer for {limit:?}"),
        )))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.judge(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.judge(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.judge(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.judge(cx, poll)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncWriteExt;

    use super::WriteDeadline;

    #[tokio::test(start_paused = true)]
    async fn a_write_nobody_reads_fails_after_the_limit_and_progress_resets_it() {
        // A pipe of 64 bytes whose reader reads nothing.
        let (writer, mut reader) = tokio::io::duplex(64);
        let mut limited = WriteDeadline::new(writer, Duration::from_secs(10));
        limited.write_all(&[1; 64]).await.unwrap();
        let start = tokio::time::Instant::now();
        let stalled = limited.write_all(&[2; 64]).await.unwrap_err();
        assert_eq!(stalled.kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        // Read: the next write goes through, its timer started anew.
        let mut drained = [0; 64];
        tokio::io::AsyncReadExt::read_exact(&mut reader, &mut drained)
            .await
            .unwrap();
        limited.write_all(&[3; 64]).await.unwrap();
    }
}
