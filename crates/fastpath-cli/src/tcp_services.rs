//! The TCP services of `fastpath serve`: echo (RFC 862), discard (RFC 863), chargen (RFC 864, the
//! bulk sender for measurements) and an outgoing client that sends a pattern and checks its echo.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};

use fastpath::{ReadyKey, Stack, TcpListener, TcpStream};

/// Byte `i` of the pattern that chargen and the client send: not periodic over any short span, so
/// a lost, repeated or misplaced segment shows.
pub fn pattern_byte(i: u64) -> u8 {
    ((i % 251) as u8) ^ ((i / 251) as u8).rotate_left(3)
}

/// The pattern's period: `i % 251` and `(i / 251) as u8` both repeat after 251 * 256 bytes.
const PATTERN_PERIOD: usize = 251 * 256;

/// One period of the pattern, twice over, so that any span of up to a period starting anywhere in the
/// first is one slice: filling and checking are copies and comparisons, not a division per byte.
fn pattern_table() -> &'static [u8] {
    static TABLE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| (0..2 * PATTERN_PERIOD as u64).map(pattern_byte).collect())
}

/// Fills `out` with the pattern from offset `at`.
pub fn fill_pattern(out: &mut [u8], at: u64) {
    let table = pattern_table();
    let mut from = (at % PATTERN_PERIOD as u64) as usize;
    for chunk in out.chunks_mut(PATTERN_PERIOD) {
        chunk.copy_from_slice(&table[from..from + chunk.len()]);
        from = (from + chunk.len()) % PATTERN_PERIOD;
    }
}

/// True when `data` is the pattern from offset `at`.
pub fn is_pattern(data: &[u8], at: u64) -> bool {
    let table = pattern_table();
    let mut from = (at % PATTERN_PERIOD as u64) as usize;
    data.chunks(PATTERN_PERIOD).all(|chunk| {
        let same = chunk == &table[from..from + chunk.len()];
        from = (from + chunk.len()) % PATTERN_PERIOD;
        same
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Service {
    Echo,
    Discard,
    Chargen,
    /// The outgoing client: sends `total` bytes, expects them echoed back.
    Client {
        total: u64,
    },
}

#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    service: Service,
    /// Echo: bytes read but not yet written back.
    pending: Vec<u8>,
    sent: u64,
    received: u64,
    peer_done: bool,
    shut: bool,
    /// The client found a byte that differs from the pattern.
    corrupt: bool,
    /// In [`TcpServices::active`]: stepped at the next [`TcpServices::run`].
    active: bool,
}

/// Totals for the final report.
#[derive(Clone, Debug, Default)]
pub struct TcpTotals {
    /// Connections accepted.
    pub accepted: u64,
    /// Bytes echoed.
    pub echoed: u64,
    /// Bytes discarded.
    pub discarded: u64,
    /// Bytes chargen sent.
    pub generated: u64,
    /// Connections that ended with an error.
    pub errors: u64,
    /// Turns connections were given (a pass steps only those that may have something to do).
    pub turns: u64,
    /// The client: bytes sent, bytes echoed back intact, and whether it finished.
    pub client: Option<(u64, u64, bool)>,
    /// Why the client failed, when it did.
    pub client_error: Option<String>,
}

/// How a connection ended.
#[derive(Debug)]
enum End {
    /// Both sides finished.
    Clean,
    /// An error, or (for the client) an echo that was cut short or differed: why.
    Failed(String),
}

/// Listeners and connections.
///
/// A pass steps only the connections that may have something to do: those the stack's readiness
/// hints name ([`Stack::take_ready_hints`]: a segment, a timer, an error or a close touched them),
/// those the previous pass did work on (a service may stop short of all it could do), and new ones.
/// With many connections and a few packets a pass, testing every connection each pass would cost far
/// more than the packets: 100 request/response connections, about 5 transactions a pass, 20 reads
/// that find nothing per transaction.
#[derive(Debug)]
pub struct TcpServices {
    listeners: Vec<(TcpListener, Service)>,
    /// Connections by slot; `None` is a free slot (in `free`).
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// A connection's slot by its readiness key.
    slots: HashMap<ReadyKey, usize>,
    /// Slots to step at the next pass (each once: a connection's `active` says it is here).
    active: Vec<usize>,
    /// The hints taken, and the slots being stepped, kept for their allocations.
    hints: Vec<ReadyKey>,
    stepping: Vec<usize>,
    pub totals: TcpTotals,
    buf: Vec<u8>,
}

impl TcpServices {
    /// Services for `listeners`; turns `stack`'s readiness hints on (the services take them all, so
    /// nothing else may).
    fn new(stack: &mut Stack, listeners: Vec<(TcpListener, Service)>) -> TcpServices {
        stack.set_ready_hints(true);
        TcpServices {
            listeners,
            conns: Vec::new(),
            free: Vec::new(),
            slots: HashMap::new(),
            active: Vec::new(),
            hints: Vec::new(),
            stepping: Vec::new(),
            totals: TcpTotals::default(),
            buf: vec![0; 256 * 1024],
        }
    }

    /// Takes `c` in, to be stepped at the next pass.
    fn add(&mut self, c: Conn) {
        let key = c.stream.ready_key();
        let slot = match self.free.pop() {
            Some(slot) => {
                self.conns[slot] = Some(c);
                slot
            }
            None => {
                self.conns.push(Some(c));
                self.conns.len() - 1
            }
        };
        self.slots.insert(key, slot);
        self.wake(slot);
    }

    /// Puts `slot` (if it holds a connection not already there) on the list for the next pass.
    fn wake(&mut self, slot: usize) {
        if let Some(c) = self.conns.get_mut(slot).and_then(Option::as_mut) {
            if !c.active {
                c.active = true;
                self.active.push(slot);
            }
        }
    }

    /// Listens for echo, discard and chargen on every address.
    pub fn listen(
        stack: &mut Stack,
        echo: u16,
        discard: u16,
        chargen: u16,
    ) -> Result<Self, String> {
        let mut listeners = Vec::new();
        for (port, service) in [
            (echo, Service::Echo),
            (discard, Service::Discard),
            (chargen, Service::Chargen),
        ] {
            let l = stack
                .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port), 1024)
                .map_err(|e| format!("listening on TCP port {port}: {e}"))?;
            listeners.push((l, service));
        }
        Ok(TcpServices::new(stack, listeners))
    }

    /// [`Self::listen`] on `[::]`: each service one dual-stack listener, for IPv6 and IPv4 alike.
    pub fn listen_dual(
        stack: &mut Stack,
        echo: u16,
        discard: u16,
        chargen: u16,
    ) -> Result<Self, String> {
        let mut listeners = Vec::new();
        for (port, service) in [
            (echo, Service::Echo),
            (discard, Service::Discard),
            (chargen, Service::Chargen),
        ] {
            let l = stack
                .tcp_listen((std::net::Ipv6Addr::UNSPECIFIED, port), 1024)
                .map_err(|e| format!("listening on TCP port {port} (both families): {e}"))?;
            listeners.push((l, service));
        }
        Ok(TcpServices::new(stack, listeners))
    }

    /// Opens the outgoing client connection.
    pub fn connect(
        &mut self,
        stack: &mut Stack,
        to: std::net::SocketAddr,
        total: u64,
    ) -> Result<(), String> {
        let stream = stack
            .tcp_connect(to)
            .map_err(|e| format!("connecting to {to}: {e}"))?;
        self.add(Conn::new(stream, Service::Client { total }));
        self.totals.client = Some((0, 0, false));
        Ok(())
    }

    /// True while the client (if any) has not finished.
    pub fn client_running(&self) -> bool {
        self.conns
            .iter()
            .flatten()
            .any(|c| matches!(c.service, Service::Client { .. }))
    }

    /// Serves every connection that may have something to do once; returns how much work was done
    /// (0: nothing to do).
    pub fn run(&mut self, stack: &mut Stack) -> usize {
        let mut work = 0;
        let mut hints = std::mem::take(&mut self.hints);
        hints.clear();
        if stack.take_ready_hints(&mut hints) {
            for key in &hints {
                if let Some(&slot) = self.slots.get(key) {
                    self.wake(slot);
                }
            }
        } else {
            // More sockets were touched than the stack keeps hints for: every one may be ready.
            for slot in 0..self.conns.len() {
                self.wake(slot);
            }
        }
        self.hints = hints;
        for i in 0..self.listeners.len() {
            let (l, service) = self.listeners[i];
            while let Ok((stream, _)) = stack.tcp_listener(l).accept() {
                self.totals.accepted += 1;
                self.add(Conn::new(stream, service));
                work += 1;
            }
        }
        let mut stepping = std::mem::take(&mut self.stepping);
        stepping.clear();
        std::mem::swap(&mut stepping, &mut self.active);
        for &slot in &stepping {
            let Some(c) = self.conns[slot].as_mut() else {
                continue;
            };
            c.active = false;
            self.totals.turns += 1;
            match step(stack, c, &mut self.buf, &mut self.totals) {
                Ok(w) => {
                    work += w;
                    if w > 0 {
                        // It may have stopped short: again at the next pass.
                        self.wake(slot);
                    }
                }
                Err(end) => {
                    let c = self.conns[slot].take().expect("stepped above");
                    self.free.push(slot);
                    // The stack keeps a connection's key while the application holds it, so none
                    // newer has it yet; checked all the same.
                    let key = c.stream.ready_key();
                    if self.slots.get(&key) == Some(&slot) {
                        self.slots.remove(&key);
                    }
                    let end = match end {
                        End::Clean if c.corrupt => {
                            End::Failed("the echo differs from what was sent".into())
                        }
                        end => end,
                    };
                    if let Service::Client { .. } = c.service {
                        let ok = matches!(end, End::Clean);
                        self.totals.client = Some((c.sent, c.received, ok));
                        if let End::Failed(why) = &end {
                            self.totals.client_error = Some(why.clone());
                        }
                    }
                    if let End::Failed(_) = end {
                        self.totals.errors += 1;
                    }
                    stack.tcp(c.stream).close();
                    work += 1;
                }
            }
        }
        self.stepping = stepping;
        work
    }
}

impl Conn {
    fn new(stream: TcpStream, service: Service) -> Conn {
        Conn {
            stream,
            service,
            pending: Vec::new(),
            sent: 0,
            received: 0,
            peer_done: false,
            shut: false,
            corrupt: false,
            active: false,
        }
    }
}

/// `e` as the end of a connection.
fn failed(e: io::Error) -> End {
    End::Failed(e.to_string())
}

/// One connection's turn: `Ok(work done)`, or `Err` when it ended.
fn step(
    stack: &mut Stack,
    c: &mut Conn,
    buf: &mut [u8],
    totals: &mut TcpTotals,
) -> Result<usize, End> {
    let mut work = 0;
    let s = c.stream;
    if let Some(e) = stack.tcp(s).take_error().ok().flatten() {
        // A chargen client ends by closing with our data unread: its RST is the normal end.
        if c.service == Service::Chargen && e.kind() == io::ErrorKind::ConnectionReset {
            return Err(End::Clean);
        }
        return Err(failed(e));
    }
    match c.service {
        Service::Echo => {
            loop {
                if !c.pending.is_empty() {
                    match stack.tcp(s).write(&c.pending) {
                        Ok(n) => {
                            totals.echoed += n as u64;
                            c.pending.drain(..n);
                            work += 1;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(failed(e)),
                    }
                    if !c.pending.is_empty() {
                        break;
                    }
                }
                match stack.tcp(s).read(buf) {
                    Ok(0) => {
                        c.peer_done = true;
                        break;
                    }
                    Ok(n) => {
                        c.pending.extend_from_slice(&buf[..n]);
                        work += 1;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(failed(e)),
                }
            }
            if c.peer_done && c.pending.is_empty() {
                return finish(stack, c);
            }
        }
        Service::Discard => loop {
            match stack.tcp(s).read_with(|d| d.len()) {
                Ok(0) => return finish(stack, c),
                Ok(n) => {
                    totals.discarded += n as u64;
                    work += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(failed(e)),
            }
        },
        Service::Chargen => {
            // Input is read and thrown away; the peer closing ends the service.
            loop {
                match stack.tcp(s).read_with(|d| d.len()) {
                    Ok(0) => return finish(stack, c),
                    Ok(_) => work += 1,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(failed(e)),
                }
            }
            while stack.tcp(s).writable() {
                let at = c.sent;
                match stack.tcp(s).write_with(buf.len(), |out| {
                    fill_pattern(out, at);
                    out.len()
                }) {
                    Ok(n) => {
                        c.sent += n as u64;
                        totals.generated += n as u64;
                        work += 1;
                    }
                    Err(_) => break,
                }
            }
        }
        Service::Client { total } => {
            while c.sent < total && stack.tcp(s).writable() {
                let at = c.sent;
                let max = (total - at).min(buf.len() as u64) as usize;
                match stack.tcp(s).write_with(max, |out| {
                    fill_pattern(out, at);
                    out.len()
                }) {
                    Ok(n) => {
                        c.sent += n as u64;
                        work += 1;
                    }
                    Err(_) => break,
                }
            }
            if c.sent == total && !c.shut {
                c.shut = true;
                let _ = stack.tcp(s).shutdown_write();
            }
            loop {
                let mut at = c.received;
                let mut corrupt = false;
                match stack.tcp(s).read_with(|d| {
                    corrupt = !is_pattern(d, at);
                    at += d.len() as u64;
                    d.len()
                }) {
                    Ok(0) if c.received == total => return Err(End::Clean),
                    Ok(0) => {
                        return Err(End::Failed(format!(
                            "the peer closed after echoing {} of {total} bytes",
                            c.received
                        )))
                    }
                    Ok(n) => {
                        c.received += n as u64;
                        c.corrupt |= corrupt;
                        work += 1;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(failed(e)),
                }
            }
        }
    }
    Ok(work)
}

/// The peer finished: finish our side too.
fn finish(stack: &mut Stack, c: &mut Conn) -> Result<usize, End> {
    if !c.shut {
        c.shut = true;
        let _ = stack.tcp(c.stream).shutdown_write();
    }
    Err(End::Clean)
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use fastpath::link::{Impairments, LinkCapabilities, PairEnd};
    use fastpath::{Instant, Ipv4Cidr, StackConfig};

    use super::*;

    /// A client stack and a server stack with the services (echo on 7) over an in-memory pair.
    fn two_stacks() -> (Stack, Stack, TcpServices, SocketAddr) {
        let (ea, eb) = PairEnd::pair(
            LinkCapabilities::plain(1500),
            1 << 16,
            Impairments::default(),
        );
        let (ia, ib) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut client = Stack::new(StackConfig::default());
        client.add_interface("pair0", ea, Ipv4Cidr::new(ia, 24));
        let mut server = Stack::new(StackConfig::default());
        server.add_interface("pair0", eb, Ipv4Cidr::new(ib, 24));
        let services = TcpServices::listen(&mut server, 7, 9, 19).unwrap();
        (client, server, services, SocketAddrV4::new(ib, 7).into())
    }

    /// Polls both stacks and runs the services, 8 times, 10 µs apart.
    fn settle(
        client: &mut Stack,
        server: &mut Stack,
        services: &mut TcpServices,
        now: &mut Instant,
    ) {
        for _ in 0..8 {
            *now = *now + Duration::from_micros(10);
            client.poll(*now);
            server.poll(*now);
            services.run(server);
            server.flush();
        }
    }

    #[test]
    fn a_pass_steps_only_the_connections_with_something_to_do() {
        let (mut client, mut server, mut services, echo) = two_stacks();
        let mut now = Instant::ZERO;
        let conns: Vec<_> = (0..50).map(|_| client.tcp_connect(echo).unwrap()).collect();
        settle(&mut client, &mut server, &mut services, &mut now);
        assert_eq!(services.totals.accepted, 50);

        let before = services.totals.turns;
        settle(&mut client, &mut server, &mut services, &mut now);
        assert_eq!(services.totals.turns, before, "idle passes step nobody");

        client.tcp(conns[17]).write(b"hello").unwrap();
        settle(&mut client, &mut server, &mut services, &mut now);
        let mut buf = [0u8; 16];
        let n = client.tcp(conns[17]).read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello", "echoed");
        let turns = services.totals.turns - before;
        assert!(
            (1..=4).contains(&turns),
            "one connection's request took {turns} turns among 50 connections"
        );
        assert_eq!(services.totals.echoed, 5);

        // Every connection still served, and one closing ends its service.
        for (i, &c) in conns.iter().enumerate() {
            client.tcp(c).write(&[i as u8]).unwrap();
        }
        settle(&mut client, &mut server, &mut services, &mut now);
        for (i, &c) in conns.iter().enumerate() {
            let n = client.tcp(c).read(&mut buf).unwrap();
            assert_eq!(&buf[..n], &[i as u8], "connection {i}");
        }
        client.tcp(conns[3]).close();
        settle(&mut client, &mut server, &mut services, &mut now);
        assert_eq!(services.conns.iter().flatten().count(), 49);
        assert_eq!(services.slots.len(), 49);
        assert_eq!(services.totals.errors, 0);
    }

    #[test]
    fn the_table_fill_and_check_agree_with_the_pattern_everywhere() {
        for at in [0u64, 1, 250, 251, 64_255, 64_256, 64_257, 1 << 40] {
            for len in [
                0usize,
                1,
                7,
                PATTERN_PERIOD - 1,
                PATTERN_PERIOD,
                3 * PATTERN_PERIOD + 5,
            ] {
                let mut out = vec![0u8; len];
                fill_pattern(&mut out, at);
                let expected: Vec<u8> = (0..len as u64).map(|k| pattern_byte(at + k)).collect();
                assert!(out == expected, "at {at}, {len} bytes");
                assert!(is_pattern(&out, at));
                if len > 0 {
                    out[len / 2] ^= 1;
                    assert!(!is_pattern(&out, at), "a flipped bit at {at}, {len} bytes");
                }
            }
        }
    }
}
