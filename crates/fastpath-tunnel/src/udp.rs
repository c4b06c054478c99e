//! The tunnel's UDP: intercepted datagrams grouped into flows by their two addresses, each flow
//! relayed through a kernel socket of its own (directly or through a SOCKS5 UDP association, as
//! the routes say; a flow routed to an HTTP proxy, which carries no UDP, is dropped and counted),
//! replies sent back from the address the application wrote to, flows bounded in number and idle
//! time.

use nix::sys::socket::{setsockopt, sockopt};

use crate::settings::*;

/// Receive and send buffers of each flow's kernel socket: room for a burst of large datagrams (a
/// hundred of 64 KB, say, as an application with an 8 MiB buffer of its own may send them), which
/// the kernel's default of about 200 KiB drops (`UdpRcvbufErrors`). Set past `net.core.rmem_max`
/// when the tunnel may (`SO_RCVBUFFORCE`, as root), else up to it.
pub(crate) const UPSTREAM_BUFFER: usize = 4 << 20;

/// One UDP flow: the kernel socket connected to its destination (or to the SOCKS5 relay), and when it
/// last carried a datagram.
pub(crate) struct Flow {
    socket: Rc<tokio::net::UdpSocket>,
    /// Through SOCKS5: the header every datagram of the flow carries to the relay.
    socks: Option<Rc<[u8]>>,
    last: Rc<Cell<tokio::time::Instant>>,
    /// Its bursts may go out as one segmented send: false once the kernel refused one for this
    /// flow (a segment larger than the route's MTU, say), so that it is not tried again per burst.
    segment: bool,
}

/// How a flow leaves: its socket and, through SOCKS5, the association's control connection (the
/// association lasts as long as it is open).
pub(crate) struct Outgoing {
    socket: tokio::net::UdpSocket,
    control: Option<tokio::net::TcpStream>,
}

pub(crate) type Flows = Rc<RefCell<HashMap<(SocketAddr, SocketAddr), Flow>>>;

/// Most datagrams one send with UDP segmentation offload carries (the kernel's limit is 64 on
/// older kernels).
pub(crate) const GSO_SEGMENTS: usize = 64;

/// Most bytes one such send carries: the payload of one IP datagram, with room for the headers.
pub(crate) const GSO_BYTES: usize = 65_000;

/// The largest datagram the intercept queue hands over.
pub(crate) const DATAGRAM: usize = 65_536;

pub(crate) async fn udp_loop(udp: Rc<UdpIntercept>, settings: Rc<Settings>, tally: Arc<Tally>) {
    let flows: Flows = Rc::default();
    // A burst of one flow's datagrams, back to back, and room for one more of any size.
    let mut buf = vec![0u8; GSO_BYTES + DATAGRAM];
    // A datagram to a SOCKS5 relay with its header in front (reused).
    let mut framed = Vec::new();
    // A datagram read while gathering a burst that did not belong to it: (where, length, app, dst).
    let mut pending: Option<(usize, usize, SocketAddr, SocketAddr)> = None;
    let gso = Cell::new(true);
    loop {
        let (n, app, dst) = match pending.take() {
            Some((at, n, app, dst)) => {
                buf.copy_within(at..at + n, 0);
                (n, app, dst)
            }
            None => match udp.recv(&mut buf[..DATAGRAM]).await {
                Ok(d) => d,
                Err(_) => return,
            },
        };
        let key = (app, dst);
        // A DNS query the fake DNS answers: back to the application from the server it asked.
        if let (Some(fake), 53) = (&settings.fake_dns, dst.port()) {
            let answer = fake
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .answer(&buf[..n]);
            if let Answer::Reply(reply) = answer {
                match udp.send_from(&reply, dst, app) {
                    Ok(_) => add(&tally.dns_answered, 1),
                    Err(_) => add(&tally.udp_send_failed, 1),
                }
                continue;
            }
        }
        let existing = flows
            .borrow()
            .get(&key)
            .map(|f| (f.socket.clone(), f.socks.clone(), f.last.clone(), f.segment));
        let (socket, socks, last, segment) = match existing {
            Some(f) => f,
            None => {
                if flows.borrow().len() >= settings.max_udp_flows {
                    add(&tally.udp_over_limit, 1);
                    continue;
                }
                let Some(target) = target_of(dst, &settings) else {
                    add(&tally.dns_unknown, 1);
                    continue;
                };
                if let Upstream::Http { .. } = settings.routes.choose(&target) {
                    // An HTTP proxy carries no UDP, and straight there would leave outside it.
                    add(&tally.udp_no_proxy, 1);
                    continue;
                }
                let Ok(Outgoing { socket, control }) = outgoing_udp(&target, &settings).await
                else {
                    add(&tally.udp_send_failed, 1);
                    continue;
                };
                let socket = Rc::new(socket);
                let socks = control.as_ref().map(|_| {
                    let mut header = Vec::new();
                    socks5::udp_header(&target, &mut header);
                    Rc::from(header)
                });
                let last = Rc::new(Cell::new(tokio::time::Instant::now()));
                flows.borrow_mut().insert(
                    key,
                    Flow {
                        socket: socket.clone(),
                        socks: socks.clone(),
                        last: last.clone(),
                        segment: true,
                    },
                );
                add(&tally.udp_flows, 1);
                tokio::task::spawn_local(udp_replies(
                    key,
                    target,
                    socket.clone(),
                    control,
                    last.clone(),
                    udp.clone(),
                    flows.clone(),
                    settings.clone(),
                    tally.clone(),
                ));
                (socket, socks, last, true)
            }
        };
        last.set(tokio::time::Instant::now());
        // A full kernel send buffer makes these wait: backpressure on every flow, no queue here.
        if let Some(header) = socks {
            framed.clear();
            framed.extend_from_slice(&header);
            framed.extend_from_slice(&buf[..n]);
            match socket.send(&framed).await {
                Ok(_) => add(&tally.udp_up, n as u64),
                Err(_) => add(&tally.udp_send_failed, 1),
            }
            continue;
        }
        // Directly: the rest of this flow's burst already queued goes out with the first datagram
        // in one system call, cut by the kernel into datagrams of `n` bytes (UDP segmentation
        // offload, `UDP_SEGMENT`); the last may be shorter.
        let mut end = n;
        let mut segments = 1;
        if gso.get() && segment && n > 0 {
            while segments < GSO_SEGMENTS && end + n <= GSO_BYTES {
                match udp.try_recv(&mut buf[end..end + DATAGRAM]) {
                    Ok((m, a, d)) if (a, d) == key && m > 0 && m <= n => {
                        end += m;
                        segments += 1;
                        if m < n {
                            break;
                        }
                    }
                    Ok((m, a, d)) => {
                        pending = Some((end, m, a, d));
                        break;
                    }
                    Err(_) => break,
                }
            }
        }
        if segments == 1 {
            match send_again_if_refused(&udp, key, &tally, || socket.send(&buf[..n])).await {
                Ok(_) => add(&tally.udp_up, n as u64),
                Err(_) => add(&tally.udp_send_failed, 1),
            }
            continue;
        }
        match send_again_if_refused(&udp, key, &tally, || send_segments(&socket, &buf[..end], n))
            .await
        {
            Ok(_) => {
                add(&tally.udp_up, end as u64);
                add(&tally.udp_segmented_sends, 1);
                add(&tally.udp_segmented_datagrams, segments as u64);
            }
            Err(e) => {
                // Not supported here, or not on this route: one at a time, and no more offload if
                // the kernel has none, or for this flow if the kernel refused its segments (a
                // segment past the route's MTU). Any other error loses the burst.
                match e.raw_os_error() {
                    Some(libc::ENOPROTOOPT | libc::EOPNOTSUPP) => gso.set(false),
                    Some(libc::EMSGSIZE | libc::EINVAL) => {
                        if let Some(flow) = flows.borrow_mut().get_mut(&key) {
                            flow.segment = false;
                            add(&tally.udp_segmenting_refused, 1);
                        }
                    }
                    _ => {
                        add(&tally.udp_send_failed, segments as u64);
                        continue;
                    }
                }
                for segment in buf[..end].chunks(n) {
                    match socket.send(segment).await {
                        Ok(_) => add(&tally.udp_up, segment.len() as u64),
                        Err(_) => add(&tally.udp_send_failed, 1),
                    }
                }
            }
        }
    }
}

/// Runs `send`, and once more if it failed with `ConnectionRefused`: that is an earlier datagram's
/// refusal (an ICMP port unreachable, as when the destination's socket was not open yet) reported on
/// this send, which the kernel then did not make. The refusal is passed on to the application as the
/// flow's replies task would have (it did not see it: this send took it).
pub(crate) async fn send_again_if_refused<F: std::future::Future<Output = io::Result<usize>>>(
    udp: &UdpIntercept,
    (app, dst): (SocketAddr, SocketAddr),
    tally: &Tally,
    mut send: impl FnMut() -> F,
) -> io::Result<usize> {
    match send().await {
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            if udp.unreachable(app, dst, 0).is_ok() {
                add(&tally.udp_refused, 1);
            }
            send().await
        }
        other => other,
    }
}

/// Sends `data` on a connected socket as datagrams of `segment` bytes (the last may be shorter),
/// in one `sendmsg` with a `UDP_SEGMENT` control message.
pub(crate) async fn send_segments(
    socket: &tokio::net::UdpSocket,
    data: &[u8],
    segment: usize,
) -> io::Result<usize> {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
    use std::os::fd::AsRawFd;
    let size = u16::try_from(segment).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    socket
        .async_io(tokio::io::Interest::WRITABLE, || {
            let iov = [io::IoSlice::new(data)];
            let cmsg = [ControlMessage::UdpGsoSegments(&size)];
            sendmsg::<()>(socket.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None)
                .map_err(io::Error::from)
        })
        .await
}

/// A kernel UDP socket bound to the chosen interface and connected to `dst`, or through SOCKS5 to
/// the relay of a new UDP association (an HTTP proxy is refused: it carries no UDP).
pub(crate) async fn outgoing_udp(target: &Target, settings: &Settings) -> io::Result<Outgoing> {
    let (proxy, auth) = match settings.routes.choose(target) {
        Upstream::Socks5 { addr, auth } => (*addr, auth.as_ref()),
        Upstream::Http { .. } => {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "an HTTP proxy carries no UDP",
            ))
        }
        Upstream::Direct => {
            let dst = match target {
                Target::Addr(a) => *a,
                // A fake DNS address's name: its first address.
                Target::Name(name, port) => tokio::net::lookup_host((name.as_str(), *port))
                    .await?
                    .next()
                    .ok_or_else(|| {
                        io::Error::new(io::ErrorKind::HostUnreachable, "a name with no address")
                    })?,
            };
            let socket = udp_socket_to(dst, settings).await?;
            return Ok(Outgoing {
                socket,
                control: None,
            });
        }
    };
    let connect = async {
        let mut control = outgoing_tcp(proxy, settings)?.connect(proxy).await?;
        // We do not know which address and port we will send from: all zeros (RFC 1928 §7).
        let unspecified = wildcard(proxy);
        let relay = socks5::request(
            &mut control,
            auth,
            socks5::UDP_ASSOCIATE,
            &Target::Addr(unspecified),
        )
        .await?;
        // An unspecified relay address means the server's own.
        let relay = if relay.ip().is_unspecified() {
            SocketAddr::new(proxy.ip(), relay.port())
        } else {
            relay
        };
        let socket = udp_socket_to(relay, settings).await?;
        Ok(Outgoing {
            socket,
            control: Some(control),
        })
    };
    tokio::time::timeout(settings.connect_timeout, connect)
        .await
        .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
}

/// True when a datagram the relay says is from `from` belongs to the flow to `target`.
pub(crate) fn is_from(from: &Target, target: &Target) -> bool {
    match (from, target) {
        (_, Target::Addr(_)) => from == target,
        (Target::Name(_, p), Target::Name(_, port)) => p == port,
        (Target::Addr(a), Target::Name(_, port)) => a.port() == *port,
    }
}

pub(crate) async fn udp_socket_to(
    to: SocketAddr,
    settings: &Settings,
) -> io::Result<tokio::net::UdpSocket> {
    let socket = tokio::net::UdpSocket::bind(wildcard(to)).await?;
    deep_buffers(&socket);
    if let Some(i) = &settings.bind_interface {
        socket.bind_device(Some(i.as_bytes()))?;
    }
    protect(&socket, settings)?;
    socket.connect(to).await?;
    Ok(socket)
}

/// Relays a flow's replies to the application, from the destination's address, until the flow has
/// been idle for `udp_idle`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn udp_replies(
    (app, dst): (SocketAddr, SocketAddr),
    target: Target,
    socket: Rc<tokio::net::UdpSocket>,
    control: Option<tokio::net::TcpStream>,
    last: Rc<Cell<tokio::time::Instant>>,
    udp: Rc<UdpIntercept>,
    flows: Flows,
    settings: Rc<Settings>,
    tally: Arc<Tally>,
) {
    let mut buf = vec![0u8; 65536];
    loop {
        let deadline = last.get() + settings.udp_idle;
        match tokio::time::timeout_at(deadline, socket.recv(&mut buf)).await {
            Ok(Ok(n)) => {
                let payload = if control.is_some() {
                    // From the relay: the header names the source, which must be the flow's (for
                    // a name, the relay may give the name or the address it found: the port
                    // must match).
                    match socks5::parse_udp(&buf[..n]) {
                        Ok((from, payload)) if is_from(&from, &target) => payload,
                        _ => {
                            add(&tally.udp_send_failed, 1);
                            continue;
                        }
                    }
                } else {
                    &buf[..n]
                };
                last.set(tokio::time::Instant::now());
                match udp.send_from(payload, dst, app) {
                    Ok(_) => add(&tally.udp_down, payload.len() as u64),
                    Err(_) => add(&tally.udp_send_failed, 1),
                }
            }
            // The destination refused a datagram: so is the application told. Other errors
            // (unreachable) pass in silence; the flow stays until idle either way.
            Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionRefused => {
                if udp.unreachable(app, dst, 0).is_ok() {
                    add(&tally.udp_refused, 1);
                }
            }
            Ok(Err(_)) => {}
            Err(_) if last.get() + settings.udp_idle <= tokio::time::Instant::now() => break,
            Err(_) => {}
        }
    }
    flows.borrow_mut().remove(&(app, dst));
    add(&tally.udp_expired, 1);
}

/// Gives a flow's socket [`UPSTREAM_BUFFER`] bytes each way, or as much as the system allows.
fn deep_buffers(socket: &tokio::net::UdpSocket) {
    if setsockopt(socket, sockopt::RcvBufForce, &UPSTREAM_BUFFER).is_err() {
        let _ = setsockopt(socket, sockopt::RcvBuf, &UPSTREAM_BUFFER);
    }
    if setsockopt(socket, sockopt::SndBufForce, &UPSTREAM_BUFFER).is_err() {
        let _ = setsockopt(socket, sockopt::SndBuf, &UPSTREAM_BUFFER);
    }
}

#[cfg(test)]
mod tests {
    use nix::sys::socket::getsockopt;

    use super::*;

    fn settings() -> Settings {
        Settings {
            routes: Routes::default(),
            bind_interface: None,
            connect_timeout: Duration::from_secs(1),
            udp_idle: Duration::from_secs(1),
            max_udp_flows: 16,
            max_tcp_flows: 16,
            fake_dns: None,
            protect: None,
        }
    }

    /// The system's cap on a socket buffer set without privilege.
    fn sysctl(name: &str) -> usize {
        std::fs::read_to_string(format!("/proc/sys/net/core/{name}"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_flows_socket_has_room_for_a_burst_of_large_datagrams() {
        let socket = udp_socket_to("127.0.0.1:9".parse().unwrap(), &settings())
            .await
            .unwrap();
        // Linux reports twice what was set (the bookkeeping overhead it allows for).
        let root = nix::unistd::geteuid().is_root();
        let expect = |cap: usize| {
            2 * if root {
                UPSTREAM_BUFFER
            } else {
                UPSTREAM_BUFFER.min(cap)
            }
        };
        assert!(getsockopt(&socket, sockopt::RcvBuf).unwrap() >= expect(sysctl("rmem_max")));
        assert!(getsockopt(&socket, sockopt::SndBuf).unwrap() >= expect(sysctl("wmem_max")));
    }
}
