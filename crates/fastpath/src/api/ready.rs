//! Readiness hints for event loops: which sockets may have become ready since the loop last asked.
//!
//! An event loop that parks tasks on sockets (`fastpath-tokio`'s driver) would otherwise test every
//! parked task after every [`Stack::poll`]: with 10,000 idle connections, 10,000 tests per packet.
//! With hints on ([`Stack::set_ready_hints`]), the transport layers note each socket they touch (a
//! datagram or a connection queued, a segment or a timer acted on, an error, a close), and
//! [`Stack::take_ready_hints`] hands the loop those sockets' [`ReadyKey`]s: it tests only the tasks
//! parked on them. A hint means "may be ready": the loop still asks. The list is bounded; when it
//! overflowed, `take_ready_hints` says so and the loop tests everything once.

use crate::stack::Stack;
use crate::tcp::{TcpListener, TcpStream};
use crate::udp::{UdpSocket, INTERCEPT_HINT};

/// Names a socket for readiness: what [`Stack::take_ready_hints`] hands out, and what a handle's
/// `ready_key` gives, to match the two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReadyKey {
    kind: Kind,
    index: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Kind {
    Tcp4,
    Tcp6,
    Udp4,
    Udp6,
    Intercepted,
}

impl ReadyKey {
    /// The queue of intercepted UDP datagrams ([`Stack::udp_intercept`]).
    pub const INTERCEPTED: ReadyKey = ReadyKey {
        kind: Kind::Intercepted,
        index: 0,
    };
}

impl TcpStream {
    /// The connection's key for readiness hints.
    pub fn ready_key(&self) -> ReadyKey {
        ReadyKey {
            kind: if self.v6 { Kind::Tcp6 } else { Kind::Tcp4 },
            index: self.index,
        }
    }
}

impl TcpListener {
    /// The listener's keys for readiness hints: one, or two for a dual-stack listener (its IPv4 half
    /// queues the IPv4 connections).
    pub fn ready_keys(&self) -> impl Iterator<Item = ReadyKey> {
        let own = ReadyKey {
            kind: if self.v6 { Kind::Tcp6 } else { Kind::Tcp4 },
            index: self.index,
        };
        let half = self.v4_half.map(|(index, _)| ReadyKey {
            kind: Kind::Tcp4,
            index,
        });
        std::iter::once(own).chain(half)
    }
}

impl UdpSocket {
    /// The socket's key for readiness hints.
    pub fn ready_key(&self) -> ReadyKey {
        ReadyKey {
            kind: if self.v6() { Kind::Udp6 } else { Kind::Udp4 },
            index: self.index(),
        }
    }
}

impl Stack {
    /// Turns readiness hints on or off (off by default; turning them off drops what was noted).
    pub fn set_ready_hints(&mut self, on: bool) {
        self.tcp.hints.set(on);
        self.tcp6.hints.set(on);
        self.udp.v4.hints.set(on);
        self.udp.v6.hints.set(on);
    }

    /// Appends to `out` the keys of the sockets that may have become ready since the last call
    /// (repeats possible, in no useful order), and forgets them. Returns false when some were not
    /// kept (more than the bound were touched): the caller should then treat every socket as
    /// possibly ready.
    pub fn take_ready_hints(&mut self, out: &mut Vec<ReadyKey>) -> bool {
        let mut complete = true;
        let mut take = |hints: &mut crate::transport::hints::Hints, kind: Kind| {
            complete &= hints.drain(|index| {
                out.push(
                    if index == INTERCEPT_HINT && matches!(kind, Kind::Udp4 | Kind::Udp6) {
                        ReadyKey::INTERCEPTED
                    } else {
                        ReadyKey { kind, index }
                    },
                )
            });
        };
        take(&mut self.tcp.hints, Kind::Tcp4);
        take(&mut self.tcp6.hints, Kind::Tcp6);
        take(&mut self.udp.v4.hints, Kind::Udp4);
        take(&mut self.udp.v6.hints, Kind::Udp6);
        complete
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

    use crate::config::StackConfig;
    use crate::stack::Stack;
    use crate::time::Instant;

    use super::*;

    fn lo(port: u16) -> SocketAddr {
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).into()
    }

    #[test]
    fn a_datagram_hints_its_socket_only_and_only_when_on() {
        let mut stack = Stack::new(StackConfig::default());
        let a = stack.udp_bind(lo(5000)).unwrap();
        let b = stack.udp_bind(lo(5001)).unwrap();
        let c = stack.udp_bind(lo(5002)).unwrap();
        let mut keys = Vec::new();
        stack.udp(c).send_to(b"off", lo(5000)).unwrap();
        stack.poll(Instant::ZERO);
        assert!(stack.take_ready_hints(&mut keys));
        assert!(keys.is_empty(), "hints are off by default");

        stack.set_ready_hints(true);
        stack.udp(c).send_to(b"on", lo(5001)).unwrap();
        stack.poll(Instant::ZERO);
        assert!(stack.take_ready_hints(&mut keys));
        assert_eq!(keys, [b.ready_key()]);
        assert_ne!(a.ready_key(), b.ready_key());
        keys.clear();
        assert!(stack.take_ready_hints(&mut keys));
        assert!(keys.is_empty(), "taken once");
    }

    #[test]
    fn a_connection_hints_its_listener_then_itself() {
        let mut stack = Stack::new(StackConfig::default());
        stack.set_ready_hints(true);
        let l = stack
            .tcp_listen(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 80), 4)
            .unwrap();
        let c = stack.tcp_connect(lo(80)).unwrap();
        for _ in 0..4 {
            stack.poll(Instant::ZERO);
        }
        let mut keys = Vec::new();
        assert!(stack.take_ready_hints(&mut keys));
        let listener: Vec<ReadyKey> = l.ready_keys().collect();
        assert!(keys.contains(&listener[0]), "{keys:?}");
        assert!(
            keys.contains(&c.ready_key()),
            "the client's handshake: {keys:?}"
        );
        let (s, _) = stack.tcp_listener(l).accept().unwrap();
        keys.clear();
        stack.tcp(c).write(b"hello").unwrap();
        for _ in 0..4 {
            stack.poll(Instant::ZERO);
        }
        assert!(stack.take_ready_hints(&mut keys));
        assert!(
            keys.contains(&s.ready_key()),
            "data for the server: {keys:?}"
        );
        assert!(
            !keys.contains(&listener[0]),
            "the listener had nothing new: {keys:?}"
        );
    }
}
