//! An in-test TCP proxy on 127.0.0.1 between a client (a worker, a queue) and a server
//! (PostgreSQL), which passes bytes through, delays them, cuts the link or resets its
//! connections on command: the faults of a network between a worker and its database.
//!
//! - [`Proxy::delay`]: every chunk read from either side waits `D` before it is written on.
//! - [`Proxy::cut`]: a dead link. Nothing is forwarded any more in either direction, and no
//!   socket is closed: each peer sees silence, not an error, as when a cable is pulled or a
//!   firewall drops packets. New connections are accepted and held, unanswered (the client's
//!   connect succeeds, its start-up message gets no reply).
//! - [`Proxy::reset`]: every open connection is closed with a TCP RST (`SO_LINGER` 0) on both
//!   sides, as a restarting load balancer or a NAT that forgot its mapping does; new connections
//!   are served as before.
//! - [`Proxy::heal`]: back to passing through. After a cut, the held bytes and the held new
//!   connections go on, as TCP's retransmissions deliver them once a link is back.
//! - [`Proxy::retarget`]: an address that moves, as a cloud database endpoint's DNS name does
//!   at a failover: new connections go to another server, and the open ones are closed with a
//!   RST, as a dead primary's are. [`Proxy::retarget_keeping`] moves it and leaves the open
//!   connections on the old server: clients that keep talking to a former primary that still
//!   answers (demoted, read-only), as pooled connections do after a DNS change.
//!
//! [`Proxy::stats`] counts connections and bytes, so that a test can assert that its fault
//! really hit traffic. Everything is bounded: at most [`MAX_CONNECTIONS`] connections at a time
//! (more are closed at once), one buffer of [`CHUNK`] bytes per direction. Dropping the proxy
//! closes its listener and every connection.
//!
//! ```no_run
//! # async fn demo(pg_url: &str) -> std::io::Result<()> {
//! use retry_tests::faults::proxy::Proxy;
//! let (proxy, url) = Proxy::in_front_of(pg_url).await?;
//! // connect a `Queue` to `url` ...
//! proxy.cut(); // a dead link
//! proxy.heal();
//! proxy.reset(); // RST on every open connection
//! assert!(proxy.stats().resets > 0);
//! # Ok(()) }
//! ```

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The most connections the proxy holds at once; more are closed as soon as they are accepted.
pub const MAX_CONNECTIONS: usize = 512;

/// The size of the buffer of each direction of a connection: the most one chunk carries.
pub const CHUNK: usize = 16 * 1024;

/// What the proxy does with the bytes it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forwards every chunk as soon as it is read.
    Pass,
    /// Forwards every chunk after this pause (each direction on its own).
    Delay(Duration),
    /// Forwards nothing, closes nothing, and holds new connections: a dead link.
    Cut,
}

/// What the proxy has seen so far; see [`Proxy::stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Connections accepted from clients (those refused over [`MAX_CONNECTIONS`] included).
    pub accepted: u64,
    /// Connections open now (accepted, not yet closed).
    pub open: u64,
    /// Bytes forwarded (handed to the write) from clients to the server.
    pub to_server: u64,
    /// Bytes forwarded (handed to the write) from the server to clients.
    pub to_client: u64,
    /// Connections closed with a RST by [`Proxy::reset`].
    pub resets: u64,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    open: AtomicU64,
    to_server: AtomicU64,
    to_client: AtomicU64,
    resets: AtomicU64,
}

/// What the listener and every connection share: the mode, the reset signal, the counters.
struct Shared {
    /// Where new connections go; [`Proxy::retarget`] moves it.
    upstream: watch::Sender<SocketAddr>,
    mode: watch::Sender<Mode>,
    /// Bumped by each [`Proxy::reset`]: every connection open then closes with a RST.
    resets: watch::Sender<u64>,
    counters: Counters,
}

/// A TCP proxy on 127.0.0.1 in front of one server address; see the [module](self).
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// The accept loop; it owns the connections' tasks, so aborting it ends them too.
    listener: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// A proxy on a free port of 127.0.0.1 that forwards to `upstream`, passing through.
    ///
    /// # Errors
    /// When no port of 127.0.0.1 can be bound.
    pub async fn start(upstream: SocketAddr) -> io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream: watch::Sender::new(upstream),
            mode: watch::Sender::new(Mode::Pass),
            resets: watch::Sender::new(0),
            counters: Counters::default(),
        });
        let listener = tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(Proxy {
            addr,
            shared,
            listener,
        })
    }

    /// A proxy in front of the server of the database URL `url`
    /// (`postgres://user@host:port/db?…`), and the same URL through the proxy.
    ///
    /// # Errors
    /// When the URL names no host and port, the host does not resolve, or no port can be bound.
    pub async fn in_front_of(url: &str) -> io::Result<(Proxy, String)> {
        let (before, host_port, after) = split_host_port(url).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{url}: no host:port in this URL"),
            )
        })?;
        let upstream = tokio::net::lookup_host(host_port)
            .await?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, host_port.to_owned()))?;
        let proxy = Proxy::start(upstream).await?;
        let proxied = format!("{before}{}{after}", proxy.addr);
        Ok((proxy, proxied))
    }

    /// The proxy's address on 127.0.0.1: what clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The mode the proxy is in.
    pub fn mode(&self) -> Mode {
        *self.shared.mode.borrow()
    }

    /// Every chunk waits `by` before it is forwarded (each direction on its own, in order).
    pub fn delay(&self, by: Duration) {
        self.shared.mode.send_replace(Mode::Delay(by));
    }

    /// A dead link: nothing is forwarded, nothing is closed, new connections are held.
    pub fn cut(&self) {
        self.shared.mode.send_replace(Mode::Cut);
    }

    /// Back to passing through: after a cut, held bytes and held connections go on.
    pub fn heal(&self) {
        self.shared.mode.send_replace(Mode::Pass);
    }

    /// Closes every open connection with a TCP RST on both sides (`SO_LINGER` 0); the mode is
    /// kept, so new connections are served as before. A connection held by a cut is reset too.
    pub fn reset(&self) {
        self.shared.resets.send_modify(|n| *n += 1);
    }

    /// The server new connections go to.
    pub fn upstream(&self) -> SocketAddr {
        *self.shared.upstream.borrow()
    }

    /// Moves the address: new connections go to `upstream`, and every open connection is
    /// closed with a RST (as [`reset`](Proxy::reset)), as a failed server's are. The mode is
    /// kept.
    pub fn retarget(&self, upstream: SocketAddr) {
        self.shared.upstream.send_replace(upstream);
        self.reset();
    }

    /// Moves the address and leaves the open connections where they are: new connections go to
    /// `upstream`, the old ones still talk to the old server (a demoted primary, still up).
    pub fn retarget_keeping(&self, upstream: SocketAddr) {
        self.shared.upstream.send_replace(upstream);
    }

    /// The counts so far.
    pub fn stats(&self) -> Stats {
        let c = &self.shared.counters;
        Stats {
            accepted: c.accepted.load(Ordering::SeqCst),
            open: c.open.load(Ordering::SeqCst),
            to_server: c.to_server.load(Ordering::SeqCst),
            to_client: c.to_client.load(Ordering::SeqCst),
            resets: c.resets.load(Ordering::SeqCst),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("addr", &self.addr)
            .field("upstream", &self.upstream())
            .field("mode", &self.mode())
            .field("stats", &self.stats())
            .finish()
    }
}

/// `scheme://user@` , `host:port`, `/db?…`: the URL around its host and port.
fn split_host_port(url: &str) -> Option<(&str, &str, &str)> {
    let authority_start = url.find("://")? + 3;
    let rest = &url[authority_start..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let host_start = rest[..authority_end].rfind('@').map_or(0, |at| at + 1);
    let host_port = &rest[host_start..authority_end];
    host_port.contains(':').then(|| {
        let start = authority_start + host_start;
        let end = authority_start + authority_end;
        (&url[..start], &url[start..end], &url[end..])
    })
}

/// Accepts clients until the proxy is dropped; the connections' tasks live in its `JoinSet`.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else { continue };
                shared.counters.accepted.fetch_add(1, Ordering::SeqCst);
                if connections.len() >= MAX_CONNECTIONS {
                    drop(client);
                    continue;
                }
                connections.spawn(connection(client, shared.clone()));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Counts a connection open for as long as it lives.
struct OpenGuard<'a>(&'a Counters);

impl Drop for OpenGuard<'_> {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One client: held while the link is cut, connected to the server, then forwarded both ways
/// until either side closes or a reset closes both with a RST.
async fn connection(mut client: TcpStream, shared: Arc<Shared>) {
    shared.counters.open.fetch_add(1, Ordering::SeqCst);
    let _open = OpenGuard(&shared.counters);
    let mut resets = shared.resets.subscribe();
    resets.mark_unchanged();
    let mut mode = shared.mode.subscribe();
    let server = tokio::select! {
        server = async {
            passable(&mut mode).await;
            let upstream = *shared.upstream.borrow();
            TcpStream::connect(upstream).await
        } => server,
        _ = resets.changed() => Err(io::ErrorKind::ConnectionReset.into()),
    };
    let Ok(mut server) = server else {
        rst(&client, &shared.counters);
        return;
    };
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let reset = {
        let (mut client_read, mut client_write) = client.split();
        let (mut server_read, mut server_write) = server.split();
        let up = forward(
            &mut client_read,
            &mut server_write,
            shared.mode.subscribe(),
            &shared.counters.to_server,
        );
        let down = forward(
            &mut server_read,
            &mut client_write,
            shared.mode.subscribe(),
            &shared.counters.to_client,
        );
        tokio::select! {
            _ = async { tokio::join!(up, down) } => false,
            _ = resets.changed() => true,
        }
    };
    if reset {
        rst(&client, &shared.counters);
        let _ = server.set_zero_linger();
    }
}

/// Sets `SO_LINGER` 0 on the client's socket: closing it (the caller drops it) sends a RST.
fn rst(client: &TcpStream, counters: &Counters) {
    let _ = client.set_zero_linger();
    counters.resets.fetch_add(1, Ordering::SeqCst);
}

/// Waits while the link is cut.
async fn passable(mode: &mut watch::Receiver<Mode>) -> Mode {
    let passable = mode.wait_for(|m| *m != Mode::Cut).await.map(|m| *m);
    match passable {
        Ok(m) => m,
        // The proxy is gone: its tasks are being aborted.
        Err(_) => std::future::pending().await,
    }
}

/// Copies `from` to `to` chunk by chunk as the mode says, until `from` closes (then shuts
/// `to`'s write side down) or either fails.
async fn forward<R, W>(from: &mut R, to: &mut W, mut mode: watch::Receiver<Mode>, bytes: &AtomicU64)
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; CHUNK];
    loop {
        // Not even read while cut: the sender's buffers fill, as over a dead link.
        passable(&mut mode).await;
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let now = *mode.borrow();
        if let Mode::Delay(by) = now {
            tokio::time::sleep(by).await;
        }
        // A cut that came while this chunk was read or delayed holds it.
        passable(&mut mode).await;
        // Counted before the write: once written, the peer may read the bytes and look at the
        // counters before this task runs again (a test saw 0 of 5 bytes under load).
        bytes.fetch_add(n as u64, Ordering::SeqCst);
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::split_host_port;

    #[test]
    fn the_host_and_port_are_found_around_user_and_database() {
        assert_eq!(
            split_host_port("postgres://postgres@127.0.0.1:5432/retry_test"),
            Some(("postgres://postgres@", "127.0.0.1:5432", "/retry_test"))
        );
        assert_eq!(
            split_host_port("postgres://u:p@h:1?sslmode=disable"),
            Some(("postgres://u:p@", "h:1", "?sslmode=disable"))
        );
        assert_eq!(split_host_port("postgres://h/db"), None);
    }
}
