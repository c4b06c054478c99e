//! An async front for fastpath on tokio, in two forms.
//!
//! - [`net`]: handles that are `Send` and shaped like `tokio::net`'s ([`net::TcpListener`],
//!   [`net::TcpStream`] with `split` and `into_split`, [`net::UdpSocket`]; and the interception
//!   calls), each taking the [`net::Net`] it belongs to. They work on the multi-threaded runtime
//!   with `tokio::spawn`; the stack sits behind a mutex, and a driver task spawned by
//!   [`net::Net::new`] polls it.
//! - [`local`] (its types also at the crate's root: [`Net`], [`TcpListener`], [`TcpStream`],
//!   [`UdpSocket`], [`UdpIntercept`]): `!Send` handles on one thread, inside a
//!   [`tokio::task::LocalSet`], with the stack in a `RefCell` and a driver, [`Net::drive`], that the
//!   program spawns. No lock: on one thread as fast as the `Send` front or a little faster, and a
//!   bulk transfer takes the `Send` front on the multi-threaded runtime about 12-15 % longer
//!   (`docs/tokio.md` has the figures). The transparent proxy runs on it, a stack per thread.
//!
//! In both, the driver polls the stack, wakes the tasks whose sockets became ready, and sleeps until
//! the stack's next deadline ([`fastpath::Stack::next_deadline`]), a handle's call that gave the
//! stack something to send, a link's wake-up ([`fastpath::Stack::set_link_waker`]: an in-memory
//! pair's other end transmitting), or a TUN interface's descriptor turning readable (registered with
//! tokio's reactor through [`AsyncFd`](tokio::io::unix::AsyncFd)). No handle polls in a loop: it
//! tries the stack's non-blocking call and, when that would block, leaves its waker for the driver.
//!
//! The driver learns which sockets may have become ready from the stack's readiness hints
//! ([`fastpath::Stack::take_ready_hints`]): after a poll it tests only the tasks parked on the sockets
//! the poll touched, so 10,000 idle connections cost nothing per packet. Every parked task is tested
//! as well when the hints overflowed, after `with_stack`, and every 100 ms as a backstop.
//!
//! The crate is Linux-only: it registers a TUN interface's descriptor ([`fastpath::TunHandle`], which
//! exists only on Linux) with tokio's reactor.
//!
//! # Example: an echo server, as with `tokio::net`
//!
//! The code of a `tokio::net` echo server, with the imports changed and the [`net::Net`] handle
//! passed: the listener's tasks are spawned with `tokio::spawn` on the multi-threaded runtime. It
//! runs over the stack's own loopback; `net::Net::with_tun` puts it on a TUN interface.
//!
//! ```
//! use fastpath::{Stack, StackConfig};
//! use fastpath_tokio::net::{Net, TcpListener, TcpStream, UdpSocket};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! async fn main() -> std::io::Result<()> {
//!     let net = Net::new(Stack::new(StackConfig::default())); // spawns the stack's driver
//!
//!     let listener = TcpListener::bind(&net, "127.0.0.1:7").await?;
//!     tokio::spawn(async move {
//!         while let Ok((mut socket, _peer)) = listener.accept().await {
//!             tokio::spawn(async move {
//!                 let (mut r, mut w) = socket.split();
//!                 tokio::io::copy(&mut r, &mut w).await?;
//!                 w.shutdown().await // FIN once the client's has come
//!             });
//!         }
//!     });
//!
//!     let mut conn = TcpStream::connect(&net, "127.0.0.1:7").await?;
//!     assert_eq!(conn.peer_addr()?, "127.0.0.1:7".parse().unwrap());
//!     conn.write_all(b"hello").await?;
//!     conn.shutdown().await?;
//!     let mut echo = Vec::new();
//!     conn.read_to_end(&mut echo).await?;
//!     assert_eq!(echo, b"hello");
//!
//!     let udp = UdpSocket::bind(&net, "[::1]:0").await?;
//!     udp.send_to(b"to myself", udp.local_addr()?).await?; // completes at once
//!     let mut buf = [0u8; 64];
//!     let (n, _from) = udp.recv_from(&mut buf).await?;
//!     assert_eq!(&buf[..n], b"to myself");
//!     Ok(())
//! }
//! ```
//!
//! # Example: the single-threaded front
//!
//! A UDP exchange and a TCP echo over the stack's own loopback, on a current-thread runtime inside a
//! `LocalSet`. [`Net::with_tun`] puts the same on a TUN interface.
//!
//! ```
//! use std::net::SocketAddr;
//! use fastpath::{Stack, StackConfig};
//! use fastpath_tokio::{Net, TcpListener, TcpStream, UdpSocket};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let local = tokio::task::LocalSet::new();
//! local.block_on(&runtime, async {
//!     let net = Net::new(Stack::new(StackConfig::default()));
//!     tokio::task::spawn_local(net.clone().drive());
//!
//!     let server = UdpSocket::bind(&net, "127.0.0.1:7".parse().unwrap())?;
//!     let client = UdpSocket::bind(&net, "127.0.0.1:0".parse().unwrap())?;
//!     client.send_to(b"ping", server.local_addr()?).await?;
//!     let mut buf = [0u8; 1500];
//!     let (n, from) = server.recv_from(&mut buf).await?;
//!     server.send_to(&buf[..n], from).await?;
//!     let (n, _) = client.recv_from(&mut buf).await?;
//!     assert_eq!(&buf[..n], b"ping");
//!
//!     let addr: SocketAddr = "[::1]:7".parse().unwrap();
//!     let listener = TcpListener::bind(&net, addr, 16)?;
//!     tokio::task::spawn_local(async move {
//!         let (conn, _peer) = listener.accept().await?;
//!         let (mut r, mut w) = tokio::io::split(conn);
//!         tokio::io::copy(&mut r, &mut w).await?;
//!         w.shutdown().await
//!     });
//!     let mut conn = TcpStream::connect(&net, addr).await?;
//!     conn.write_all(b"hello").await?;
//!     conn.shutdown().await?;
//!     let mut echo = Vec::new();
//!     conn.read_to_end(&mut echo).await?;
//!     assert_eq!(echo, b"hello");
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Threading
//!
//! A stack is single-threaded: one call at a time. The [`local`] front lives on one thread with it
//! and needs no lock; a program on a multi-threaded runtime either uses the [`net`] front (one mutex
//! per stack, locked for each call) or gives each stack a thread of its own with a current-thread
//! runtime and a `LocalSet`, as `fastpath tunnel --queues N` does. `docs/tokio.md` compares the two.
//!
//! # Cancellation
//!
//! As tokio's own types: dropping an `accept`, `recv_from` or `read` future loses nothing (the
//! connection or datagram stays queued for the next call); dropping a `connect` future before it
//! completes leaves the connection opening in the stack, and it is aborted with a reset when nothing
//! holds it (the handle is dropped with the future); `send_to` completes at once (fastpath's UDP send
//! never waits).

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod local;
pub mod net;
mod ready;

pub use local::{Net, TcpListener, TcpStream, UdpIntercept, UdpSocket};

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
