//! The tunnel's TCP: every connection the stack accepts from the applications is relayed over a
//! kernel connection to its destination (directly, bound to an interface if asked, through SOCKS5
//! or through an HTTP proxy's CONNECT, as the routes say), bytes pumped both ways with half-closes
//! and resets passed on.

use crate::settings::*;
use crate::stats::Counter;

pub(crate) async fn tcp_loop(listener: TcpListener, settings: Rc<Settings>, tally: Arc<Tally>) {
    while let Ok((conn, _)) = listener.accept().await {
        if tally.tcp_live.get() >= settings.max_tcp_flows as u64 {
            add(&tally.tcp_over_limit, 1);
            conn.abort();
            continue;
        }
        tokio::task::spawn_local(relay_tcp(conn, settings.clone(), tally.clone()));
    }
}

/// A kernel connection to `target` (an address, or a fake DNS address's name) for the
/// application's connection from `app`: straight there, through a SOCKS5 server (CONNECT) or
/// through an HTTP proxy (CONNECT), whichever the routes choose for it.
///
/// Straight there, the connection leaves from the application's own port when the kernel lets it
/// (`SO_REUSEADDR`, then `bind`), else from one the kernel picks. With thousands of short
/// connections to one destination, the kernel's own choice searches its ephemeral range past every
/// port whose connection to that destination is in TIME-WAIT, and that search took a third of the
/// tunnel's time; the application's port is one its own kernel just found free for that
/// destination.
pub(crate) async fn connect_upstream(
    target: &Target,
    app: SocketAddr,
    settings: &Settings,
) -> io::Result<tokio::net::TcpStream> {
    match (settings.routes.choose(target), target) {
        (Upstream::Direct, Target::Addr(dst)) => connect_direct(*dst, app, settings).await,
        // A fake DNS address's name: each of its addresses in turn.
        (Upstream::Direct, Target::Name(name, port)) => {
            let mut last = io::Error::new(io::ErrorKind::HostUnreachable, "a name with no address");
            for dst in tokio::net::lookup_host((name.as_str(), *port)).await? {
                match connect_direct(dst, app, settings).await {
                    Ok(s) => return Ok(s),
                    Err(e) => last = e,
                }
            }
            Err(last)
        }
        (Upstream::Socks5 { addr, auth }, target) => {
            let mut s = outgoing_tcp(*addr, settings)?.connect(*addr).await?;
            socks5::request(&mut s, auth.as_ref(), socks5::CONNECT, target).await?;
            Ok(s)
        }
        (Upstream::Http { addr, auth }, target) => {
            let mut s = outgoing_tcp(*addr, settings)?.connect(*addr).await?;
            crate::http_connect::connect(&mut s, target, auth.as_ref()).await?;
            Ok(s)
        }
    }
}

/// A kernel connection straight to `dst`, from the application's port if the kernel lets it (see
/// [`connect_upstream`]).
pub(crate) async fn connect_direct(
    dst: SocketAddr,
    app: SocketAddr,
    settings: &Settings,
) -> io::Result<tokio::net::TcpStream> {
    let socket = outgoing_tcp(dst, settings)?;
    let local = SocketAddr::new(wildcard(dst).ip(), app.port());
    let bound = socket.set_reuseaddr(true).is_ok() && socket.bind(local).is_ok();
    match socket.connect(dst).await {
        // That 4-tuple is still in TIME-WAIT here: a port of the kernel's choosing.
        Err(e) if bound && e.kind() == io::ErrorKind::AddrNotAvailable => {
            outgoing_tcp(dst, settings)?.connect(dst).await
        }
        other => other,
    }
}

pub(crate) async fn relay_tcp(conn: TcpStream, settings: Rc<Settings>, tally: Arc<Tally>) {
    let Ok((dst, app)) = conn.addrs() else {
        return;
    };
    let Some(target) = target_of(dst, &settings) else {
        add(&tally.dns_unknown, 1);
        let _ = conn.unreachable(fastpath::Unreachable::Host);
        return;
    };
    add(&tally.tcp_flows, 1);
    tally.tcp_live.set(tally.tcp_live.get() + 1);
    // Held SYNs at their bound (a flood of them, say): the stack answered this one with a SYN
    // cookie, and it arrives established. Its destination is asked only now; a refusal or no answer
    // resets it.
    let held = conn.is_held();
    if !held {
        add(&tally.tcp_handshake_first, 1);
    }
    let upstream = tokio::time::timeout(
        settings.connect_timeout,
        connect_upstream(&target, app, &settings),
    )
    .await;
    match upstream {
        Ok(Ok(mut upstream)) => {
            if held && conn.confirm().is_err() {
                // The application gave up meanwhile (its RST ended the held connection).
                add(&tally.tcp_reset, 1);
                let _ = upstream.set_zero_linger();
                tally.tcp_live.set(tally.tcp_live.get() - 1);
                return;
            }
            let _ = upstream.set_nodelay(true);
            let _ = conn.set_nodelay(true);
            let result = {
                let (ur, mut uw) = upstream.split();
                tokio::try_join!(
                    pump_up(&conn, &mut uw, &tally.tcp_up),
                    pump_down(ur.as_ref(), &conn, &tally.tcp_down)
                )
            };
            if result.is_err() {
                // A reset (or any error) on one side resets the other.
                add(&tally.tcp_reset, 1);
                conn.abort();
                let _ = upstream.set_zero_linger();
            }
        }
        // Answered as the destination answered the tunnel.
        Ok(Err(e)) => match fastpath::Unreachable::of(&e) {
            Some(why) if conn.unreachable(why).is_ok() => add(&tally.tcp_unreachable, 1),
            _ => {
                add(&tally.tcp_refused, 1);
                conn.abort();
            }
        },
        // No answer: neither is there one for the application (dropping a held stream says
        // nothing; an established one is reset).
        Err(_) => {
            add(&tally.tcp_timed_out, 1);
            if !held {
                conn.abort();
            }
        }
    }
    tally.tcp_live.set(tally.tcp_live.get() - 1);
}

/// The application's bytes to the destination until the end of the stream, then a half-close:
/// without a copy in this process, from the stack's receive buffers straight into the kernel
/// socket (copy avoidance, paper 002 §3.1). A full kernel send buffer makes it wait, and the bytes
/// stay in the connection's receive buffer, whose window then closes: backpressure to the
/// application. It holds no buffer of its own.
pub(crate) async fn pump_up(
    from: &TcpStream,
    to: &mut tokio::net::tcp::WriteHalf<'_>,
    bytes: &Counter,
) -> io::Result<()> {
    loop {
        let mut ended = true;
        let mut failed = None;
        let socket: &tokio::net::TcpStream = to.as_ref();
        let n = from
            .read_with(|data| {
                ended = false;
                moved(socket.try_write(data), &mut failed)
            })
            .await?;
        if let Some(e) = failed {
            return Err(e);
        }
        if ended {
            return to.shutdown().await;
        }
        add(bytes, n as u64);
        if n == 0 {
            socket.writable().await?;
        }
    }
}

/// The destination's bytes to the application until the end of the stream, then a half-close:
/// read from the kernel socket straight into the connection's send buffer (copy avoidance, paper
/// 002 §3.1). A full send buffer makes it wait, and the bytes stay in the kernel's receive buffer,
/// whose window then closes: backpressure to the destination. An idle connection grows no buffer:
/// reads take at most 512 bytes until one fills them, and only then up to 256 KiB at a time (reads
/// of 64 KiB had each leave a TSO segment of 45 MSS and a tail of a few hundred bytes: segments of
/// 31 KB on average where they are now 51 KB, and download 22 to 25 Gbit/s).
pub(crate) async fn pump_down(
    from: &tokio::net::TcpStream,
    to: &TcpStream,
    bytes: &Counter,
) -> io::Result<()> {
    let mut max = 512;
    loop {
        from.readable().await?;
        let mut ended = false;
        let mut failed = None;
        let n = to
            .write_with(max, |room| {
                let read = from.try_read(room);
                ended = matches!(read, Ok(0));
                moved(read, &mut failed)
            })
            .await?;
        if let Some(e) = failed {
            return Err(e);
        }
        if ended {
            let mut to = to;
            return to.shutdown().await;
        }
        add(bytes, n as u64);
        // Requests grow with what the reads bring (doubling when one filled its room), so a short
        // answer does not ask the send buffer for room it will not use.
        if n == max {
            max = (2 * max).min(256 << 10);
        }
    }
}

/// What a non-blocking call on a kernel socket moved, for a closure lending the stack's buffers: the
/// bytes, or 0 if it would block, or 0 with the error kept in `failed`.
pub(crate) fn moved(result: io::Result<usize>, failed: &mut Option<io::Error>) -> usize {
    match result {
        Ok(n) => n,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
        Err(e) => {
            *failed = Some(e);
            0
        }
    }
}
