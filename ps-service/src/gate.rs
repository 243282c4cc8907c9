//! What a client can hold open on a node's ports: at most a set number of connections per
//! listener (past it, new ones wait in the kernel's backlog), and a connection must send its
//! first bytes (the HTTP/2 preface, a TLS hello, a request line) within [`GREETING_TIME`] or be
//! closed. Without the gate, ~1,100 connections that never sent a byte used up a 1,024
//! open-file limit and locked every client out.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// How long a new connection may take to send [`GREETING_BYTES`].
pub const GREETING_TIME: Duration = Duration::from_secs(10);
/// The HTTP/2 client preface is 24 bytes; a TLS hello or an HTTP/1 request line is longer.
const GREETING_BYTES: usize = 24;
/// Connections a gRPC listener serves at once, at most; fewer if the open-file limit is low.
pub const GRPC_CONNECTIONS: usize = 4096;
/// Connections the HTTP listener (status page, `/metrics`) serves at once, at most.
pub const HTTP_CONNECTIONS: usize = 128;
/// Open files kept for everything but connections (snapshots, logs, the other listener).
const RESERVED_FILES: usize = 256;

/// A listener's connection slots.
#[derive(Debug, Clone)]
pub struct Gate {
    slots: Arc<Semaphore>,
    greeting: Duration,
}

impl Gate {
    /// A gate of `wanted` slots, fewer if this process's open-file limit (raised to its hard
    /// limit first) leaves less than that for connections.
    pub fn new(wanted: usize) -> Gate {
        let files = raise_open_files().saturating_sub(RESERVED_FILES);
        let slots = wanted.min(files / 2).max(16);
        Gate {
            slots: Arc::new(Semaphore::new(slots)),
            greeting: GREETING_TIME,
        }
    }

    /// The next connection of `listener`, once a slot is free. Accept errors (the open-file
    /// limit reached, a peer gone before it was accepted) are waited out, never returned: a
    /// listener that stopped on them would lock every client out for good.
    pub async fn accept(&self, listener: &TcpListener) -> Gated {
        let permit = self.slots.clone().acquire_owned().await;
        let permit = permit.expect("the gate's semaphore is never closed");
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    return Gated::new(stream, permit, self.greeting);
                }
                Err(e) => {
                    tracing::debug!("accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// `listener`'s connections through this gate, as tonic's server takes them.
    pub fn incoming(
        self,
        listener: TcpListener,
    ) -> impl Stream<Item = Result<Gated, std::convert::Infallible>> + Send + 'static {
        futures::stream::unfold((self, listener), |(gate, listener)| async move {
            let next = gate.accept(&listener).await;
            Some((Ok(next), (gate, listener)))
        })
    }
}

/// Raises this process's soft open-file limit to its hard limit (once is enough; again is
/// harmless) and returns the soft limit now in force.
fn raise_open_files() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write only the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX)
}

/// An accepted connection holding its slot until dropped, closed with an error if its first
/// [`GREETING_BYTES`] do not arrive within the gate's greeting time.
pub struct Gated {
    stream: TcpStream,
    _slot: OwnedSemaphorePermit,
    greeting: Option<Pin<Box<Sleep>>>,
    read: usize,
}

impl Gated {
    fn new(stream: TcpStream, slot: OwnedSemaphorePermit, greeting: Duration) -> Gated {
        Gated {
            stream,
            _slot: slot,
            greeting: Some(Box::pin(tokio::time::sleep(greeting))),
            read: 0,
        }
    }
}

impl AsyncRead for Gated {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        match polled {
            Poll::Ready(Ok(())) => {
                self.read += buf.filled().len() - before;
                if self.read >= GREETING_BYTES {
                    self.greeting = None;
                }
            }
            Poll::Pending => {
                // Nothing to read: closed if the greeting time ran out (the timer's waker is
                // registered by this poll, so a silent peer is woken up for).
                if let Some(deadline) = self.greeting.as_mut()
                    && deadline.as_mut().poll(cx).is_ready()
                {
                    let why = "no greeting in time: connection closed";
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, why)));
                }
            }
            Poll::Ready(Err(_)) => {}
        }
        polled
    }
}

impl AsyncWrite for Gated {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

impl Connected for Gated {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.stream.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A gate of `slots` whose connections must greet within 300 ms, on a listener of
    /// 127.0.0.1.
    async fn gate(slots: usize) -> (Gate, TcpListener) {
        let gate = Gate {
            slots: Arc::new(Semaphore::new(slots)),
            greeting: Duration::from_millis(300),
        };
        (gate, TcpListener::bind("127.0.0.1:0").await.unwrap())
    }

    #[tokio::test]
    async fn a_connection_past_the_cap_waits_for_a_slot() {
        let (gate, listener) = gate(2).await;
        let addr = listener.local_addr().unwrap();
        let _peers = [
            TcpStream::connect(addr).await.unwrap(),
            TcpStream::connect(addr).await.unwrap(),
            TcpStream::connect(addr).await.unwrap(),
        ];
        let first = gate.accept(&listener).await;
        let _second = gate.accept(&listener).await;
        let third = tokio::time::timeout(Duration::from_millis(200), gate.accept(&listener));
        assert!(
            third.await.is_err(),
            "a third connection got in past a cap of 2"
        );
        drop(first);
        let third = tokio::time::timeout(Duration::from_secs(5), gate.accept(&listener));
        assert!(
            third.await.is_ok(),
            "a freed slot admits the next connection"
        );
    }

    #[tokio::test]
    async fn a_silent_connection_is_closed_and_a_greeting_one_is_not() {
        let (gate, listener) = gate(4).await;
        let addr = listener.local_addr().unwrap();
        let _silent = TcpStream::connect(addr).await.unwrap();
        let mut silent = gate.accept(&listener).await;
        let mut talker = TcpStream::connect(addr).await.unwrap();
        let mut greeted = gate.accept(&listener).await;
        talker.write_all(&[b'x'; GREETING_BYTES]).await.unwrap();

        let mut buf = [0u8; 64];
        let closed = tokio::time::timeout(Duration::from_secs(5), silent.read(&mut buf)).await;
        let err = closed.expect("closed in time").expect_err("an error");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");

        assert_eq!(greeted.read(&mut buf).await.unwrap(), GREETING_BYTES);
        tokio::time::sleep(Duration::from_millis(400)).await;
        talker.write_all(b"later").await.unwrap();
        assert_eq!(
            greeted.read(&mut buf).await.unwrap(),
            5,
            "past the greeting time"
        );
    }
}
