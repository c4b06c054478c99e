//! What the relays of every queue share: the [`Settings`] a [`Config`](crate::Config) becomes, and
//! the helpers both relays use (where a destination goes, kernel sockets for it).

pub(crate) use std::cell::{Cell, RefCell};
pub(crate) use std::collections::HashMap;
pub(crate) use std::io;
pub(crate) use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
pub(crate) use std::rc::Rc;
pub(crate) use std::sync::{Arc, Mutex};
pub(crate) use std::time::Duration;

pub(crate) use fastpath_tokio::{TcpListener, TcpStream, UdpIntercept};
pub(crate) use tokio::io::AsyncWriteExt;

pub(crate) use crate::fake_dns::{Answer, FakeDns};
pub(crate) use crate::rules::{Routes, Upstream};
pub(crate) use crate::socks5::{self, Target};
pub(crate) use crate::stats::{add, Tally};

/// A queue's share of the configuration, and what all queues share.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) routes: Routes,
    pub(crate) bind_interface: Option<String>,
    pub(crate) connect_timeout: Duration,
    pub(crate) udp_idle: Duration,
    /// This queue's share of the limits.
    pub(crate) max_udp_flows: usize,
    pub(crate) max_tcp_flows: usize,
    /// The fake DNS table, shared by every queue (a query and the connection it leads to may reach
    /// different queues).
    pub(crate) fake_dns: Option<Arc<Mutex<FakeDns>>>,
    pub(crate) protect: Option<crate::Protect>,
}

/// A kernel socket of `dst`'s family, bound to the chosen interface.
pub(crate) fn outgoing_tcp(
    dst: SocketAddr,
    settings: &Settings,
) -> io::Result<tokio::net::TcpSocket> {
    let socket = match dst {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    if let Some(i) = &settings.bind_interface {
        socket.bind_device(Some(i.as_bytes()))?;
    }
    protect(&socket, settings)?;
    Ok(socket)
}

/// Hands a new outgoing socket to the configuration's protect hook, if it has one.
pub(crate) fn protect(socket: &impl std::os::fd::AsFd, settings: &Settings) -> io::Result<()> {
    match &settings.protect {
        Some(p) => p.call(socket.as_fd()),
        None => Ok(()),
    }
}

/// Where a flow to `dst` goes: `dst` itself, or the name a fake DNS address stands for. `None` for
/// an address of the fake range that no name has.
pub(crate) fn target_of(dst: SocketAddr, settings: &Settings) -> Option<Target> {
    let (Some(fake), IpAddr::V4(ip)) = (&settings.fake_dns, dst.ip()) else {
        return Some(Target::Addr(dst));
    };
    let fake = fake.lock().unwrap_or_else(|e| e.into_inner());
    if !fake.contains(ip) {
        return Some(Target::Addr(dst));
    }
    fake.name_of(ip)
        .map(|name| Target::Name(name.to_string(), dst.port()))
}

/// The unspecified address of `like`'s family, port 0.
pub(crate) fn wildcard(like: SocketAddr) -> SocketAddr {
    match like {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    }
}
