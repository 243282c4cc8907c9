//! What a client can hold open on a node's ports: at most a set number of connections per
//! listener, and all listeners of the process together within its open-file limit (past
//! either, new ones wait in the kernel's backlog); a connection must send its first bytes
//! (the HTTP/2 preface, a TLS hello, a request line) within [`GREETING_TIME`] or be closed; and
//! while a connection waits for a slot, the open connection that has gone longest without a
//! request, at least [`IDLE_EVICTION`], is closed to make room. Without the gate, ~1,100
//! connections that never sent a byte used up a 1,024 open-file limit and locked every client
//! out; without the eviction, 4,096 idle HTTP/2 connections that answer pings held every slot.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::Stream;
use futures::task::AtomicWaker;
use parking_lot::Mutex;
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
/// Open files kept for everything but connections (snapshots, logs, outgoing connections).
const RESERVED_FILES: usize = 256;
/// How long an open connection may go without a request before it is closed for one that
/// waits for a slot (a pooled client reconnects when it needs to).
pub const IDLE_EVICTION: Duration = Duration::from_secs(15);
/// How often a connection waiting for a slot looks again for one idle long enough to close.
const EVICTION_CHECK: Duration = Duration::from_secs(1);

/// A listener's connection slots, and the connections holding them.
#[derive(Debug, Clone)]
pub struct Gate {
    slots: Arc<Semaphore>,
    /// Every listener's connections of this process: its open-file budget.
    process: Arc<Semaphore>,
    greeting: Duration,
    idle: Duration,
    open: Arc<Mutex<Vec<Weak<Activity>>>>,
}

impl Gate {
    /// A gate of `wanted` slots, within the process's budget of connections over all its
    /// listeners: half of what its open-file limit (raised to its hard limit first) leaves,
    /// the other half kept for its outgoing connections.
    pub fn new(wanted: usize) -> Gate {
        Gate::with(wanted, GREETING_TIME, IDLE_EVICTION)
    }

    fn with(wanted: usize, greeting: Duration, idle: Duration) -> Gate {
        Gate {
            slots: Arc::new(Semaphore::new(wanted)),
            process: process_slots(),
            greeting,
            idle,
            open: Default::default(),
        }
    }

    /// The next connection of `listener`, once a slot is free (in the listener's and in the
    /// process's). Accept errors (the open-file limit reached, a peer gone before it was
    /// accepted) are waited out, never returned: a listener that stopped on them would lock
    /// every client out for good.
    pub async fn accept(&self, listener: &TcpListener) -> Gated {
        let slots = [self.slot(&self.slots).await, self.slot(&self.process).await];
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let activity = Arc::new(Activity::new());
                    let mut open = self.open.lock();
                    open.retain(|a| a.strong_count() > 0);
                    open.push(Arc::downgrade(&activity));
                    return Gated::new(stream, slots, activity, self.greeting);
                }
                Err(e) => {
                    tracing::debug!("accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// A slot of `slots`: at once if one is free, else once one is, closing meanwhile the
    /// connection of this gate idle longest past its idle time, if any.
    async fn slot(&self, slots: &Arc<Semaphore>) -> OwnedSemaphorePermit {
        loop {
            if let Ok(slot) = slots.clone().try_acquire_owned() {
                return slot;
            }
            self.close_idlest();
            let waited = tokio::time::timeout(EVICTION_CHECK, slots.clone().acquire_owned());
            if let Ok(slot) = waited.await {
                return slot.expect("the gate's semaphores are never closed");
            }
        }
    }

    /// Closes the connection with no request in hand that has gone longest without one, if
    /// that is at least the gate's idle time.
    fn close_idlest(&self) {
        let open = self.open.lock();
        let idlest = (open.iter().filter_map(Weak::upgrade))
            .filter(|a| !a.closing.load(Ordering::Relaxed) && a.idle_for() >= self.idle)
            .max_by_key(|a| a.idle_for());
        if let Some(idlest) = idlest {
            tracing::debug!(idle = ?idlest.idle_for(), "closing an idle connection for a new one");
            idlest.closing.store(true, Ordering::Relaxed);
            idlest.reader.wake();
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

/// The process's connection slots over all its listeners, sized once from its open-file limit.
fn process_slots() -> Arc<Semaphore> {
    static SLOTS: OnceLock<Arc<Semaphore>> = OnceLock::new();
    let files = || raise_open_files().saturating_sub(RESERVED_FILES);
    (SLOTS.get_or_init(|| Arc::new(Semaphore::new((files() / 2).max(16))))).clone()
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

/// When a connection last served a request and how many it serves now, as the layer around
/// a node's services ([`ActivityLayer`]) or its HTTP handler records them; and the gate's
/// word that it be closed.
#[derive(Debug)]
pub struct Activity {
    opened: Instant,
    /// Milliseconds after `opened` when a request last started or ended.
    last_ms: AtomicU64,
    in_hand: AtomicU32,
    closing: AtomicBool,
    /// The connection's reader, woken to close it.
    reader: AtomicWaker,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            opened: Instant::now(),
            last_ms: AtomicU64::new(0),
            in_hand: AtomicU32::new(0),
            closing: AtomicBool::new(false),
            reader: AtomicWaker::new(),
        }
    }

    /// How long since a request last started or ended (or the connection opened); zero while
    /// one is in hand.
    fn idle_for(&self) -> Duration {
        if self.in_hand.load(Ordering::Relaxed) > 0 {
            return Duration::ZERO;
        }
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.opened.elapsed().saturating_sub(last)
    }

    fn touch(&self) {
        let now = self.opened.elapsed().as_millis() as u64;
        self.last_ms.store(now, Ordering::Relaxed);
    }

    /// Marks a request started; the guard marks it ended when dropped.
    pub fn request(self: &Arc<Self>) -> InHand {
        self.touch();
        self.in_hand.fetch_add(1, Ordering::Relaxed);
        InHand(self.clone())
    }
}

/// A request a connection serves: see [`Activity::request`].
#[derive(Debug)]
pub struct InHand(Arc<Activity>);

impl Drop for InHand {
    fn drop(&mut self) {
        self.0.in_hand.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

/// What a gated connection tells its requests (tonic's connect info): its peer, and its
/// [`Activity`].
#[derive(Debug, Clone)]
pub struct GateInfo {
    /// The peer's and the local address.
    pub tcp: TcpConnectInfo,
    /// Where its requests are recorded.
    pub activity: Arc<Activity>,
}

/// An accepted connection holding its slots until dropped, closed with an error if its first
/// [`GREETING_BYTES`] do not arrive within the gate's greeting time, or when the gate closes
/// it for a waiting connection.
pub struct Gated {
    stream: TcpStream,
    _slots: [OwnedSemaphorePermit; 2],
    activity: Arc<Activity>,
    greeting: Option<Pin<Box<Sleep>>>,
    read: usize,
}

impl Gated {
    fn new(
        stream: TcpStream,
        slots: [OwnedSemaphorePermit; 2],
        activity: Arc<Activity>,
        greeting: Duration,
    ) -> Gated {
        Gated {
            stream,
            _slots: slots,
            activity,
            greeting: Some(Box::pin(tokio::time::sleep(greeting))),
            read: 0,
        }
    }

    /// Where the connection's requests are to be recorded.
    pub fn activity(&self) -> Arc<Activity> {
        self.activity.clone()
    }
}

impl AsyncRead for Gated {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.activity.reader.register(cx.waker());
        if self.activity.closing.load(Ordering::Relaxed) {
            let why = "closed after idling, for a connection waiting for a slot";
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::ConnectionAborted, why)));
        }
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
    type ConnectInfo = GateInfo;

    fn connect_info(&self) -> GateInfo {
        GateInfo {
            tcp: self.stream.connect_info(),
            activity: self.activity.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A gate of `slots` whose connections must greet within 300 ms, on a listener of
    /// 127.0.0.1.
    async fn gate(slots: usize) -> (Gate, TcpListener) {
        let gate = Gate::with(slots, Duration::from_millis(300), Duration::from_secs(600));
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

    #[tokio::test]
    async fn a_full_gate_closes_the_idlest_connection_never_a_busy_one() {
        let idle = Duration::from_millis(200);
        let gate = Gate::with(2, Duration::from_secs(600), idle);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _peers = [
            TcpStream::connect(addr).await.unwrap(),
            TcpStream::connect(addr).await.unwrap(),
            TcpStream::connect(addr).await.unwrap(),
        ];
        let mut idler = gate.accept(&listener).await;
        let busy = gate.accept(&listener).await;
        let in_hand = busy.activity().request();
        // The idler's reader, as a server's connection task runs it: closed, it frees its slot.
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 8];
            idler.read(&mut buf).await
        });
        let third = tokio::time::timeout(Duration::from_secs(5), gate.accept(&listener));
        let _third = third.await.expect("the idle connection made room");
        let closed = reader.await.unwrap().expect_err("closed");
        assert_eq!(closed.kind(), io::ErrorKind::ConnectionAborted, "{closed}");
        assert!(
            !busy.activity.closing.load(Ordering::Relaxed),
            "a connection with a request in hand stays"
        );
        drop(in_hand);
    }
}
