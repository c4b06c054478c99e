//! packetdrill-like checks run straight against the shim (no packetdrill needed): each one plays a
//! short script of system calls and packets, with the test as the remote end, in virtual time.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use etherparse::{PacketBuilder, SlicedPacket, TransportSlice};
use fastpath_packetdrill::{Shim, ShimConfig};

const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 1);
const REMOTE: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);

/// A TCP segment from the remote end (192.0.2.1, port 5000 by default) to the stack (192.168.0.1,
/// port 8080 by default).
struct Seg {
    syn: bool,
    ack: Option<u32>,
    fin: bool,
    rst: bool,
    seq: u32,
    data: Vec<u8>,
    from: u16,
    to: u16,
}

impl Seg {
    fn new(seq: u32) -> Seg {
        Seg {
            syn: false,
            ack: None,
            fin: false,
            rst: false,
            seq,
            data: Vec::new(),
            from: 5000,
            to: 8080,
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let mut b = PacketBuilder::ipv4(REMOTE.octets(), LOCAL.octets(), 64)
            .tcp(self.from, self.to, self.seq, 32768);
        if self.syn {
            b = b.syn();
        }
        if let Some(a) = self.ack {
            b = b.ack(a);
        }
        if self.fin {
            b = b.fin();
        }
        if self.rst {
            b = b.rst();
        }
        let mut out = Vec::new();
        b.write(&mut out, &self.data).unwrap();
        out
    }
}

/// What the test reads off a segment the stack sent.
#[derive(Debug)]
struct Out {
    syn: bool,
    ack: bool,
    fin: bool,
    rst: bool,
    seq: u32,
    ack_no: u32,
    src_port: u16,
    dst_port: u16,
    len: usize,
}

fn parse(p: &[u8]) -> Out {
    let s = SlicedPacket::from_ip(p).expect("an IP packet");
    let Some(TransportSlice::Tcp(t)) = s.transport else {
        panic!("not TCP: {p:?}");
    };
    Out {
        syn: t.syn(),
        ack: t.ack(),
        fin: t.fin(),
        rst: t.rst(),
        seq: t.sequence_number(),
        ack_no: t.acknowledgment_number(),
        src_port: t.source_port(),
        dst_port: t.destination_port(),
        len: t.payload().len(),
    }
}

fn shim() -> Shim {
    Shim::new(ShimConfig::default())
}

fn listening(sh: &Shim) -> i32 {
    let fd = sh
        .socket(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_TCP)
        .unwrap();
    sh.setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)
        .unwrap();
    sh.bind(fd, SocketAddrV4::new(LOCAL, 8080).into()).unwrap();
    sh.listen(fd, 1).unwrap();
    fd
}

/// A connection the peer opened to `listening`'s socket, accepted: its descriptor and our ISS.
fn accepted(sh: &Shim) -> (i32, u32) {
    let lfd = listening(sh);
    let mut syn = Seg::new(1000);
    syn.syn = true;
    sh.netdev_send(&syn.bytes());
    let (p, _) = sh.netdev_receive().expect("SYN-ACK");
    let iss = parse(&p).seq;
    let mut ack = Seg::new(1001);
    ack.ack = Some(iss.wrapping_add(1));
    sh.netdev_send(&ack.bytes());
    let (fd, _) = sh.accept(lfd).unwrap();
    (fd, iss)
}

/// Passive open, a write, the peer's FIN and our close: the basic handshake and teardown.
#[test]
fn passive_open_write_and_close() {
    let sh = shim();
    let lfd = listening(&sh);
    // Non-blocking accept with nothing queued: EAGAIN.
    sh.fcntl(lfd, libc::F_SETFL, libc::O_NONBLOCK as i64)
        .unwrap();
    assert_eq!(sh.accept(lfd).unwrap_err(), libc::EAGAIN);

    let mut syn = Seg::new(1000);
    syn.syn = true;
    sh.netdev_send(&syn.bytes());
    let (p, _) = sh.netdev_receive().expect("SYN-ACK");
    let synack = parse(&p);
    assert!(
        synack.syn && synack.ack && synack.ack_no == 1001,
        "{synack:?}"
    );
    assert_eq!((synack.src_port, synack.dst_port), (8080, 5000));

    let mut ack = Seg::new(1001);
    ack.ack = Some(synack.seq.wrapping_add(1));
    sh.netdev_send(&ack.bytes());
    let (fd, peer) = sh.accept(lfd).unwrap();
    assert_eq!(peer, SocketAddr::from(SocketAddrV4::new(REMOTE, 5000)));

    assert_eq!(sh.write(fd, &[7; 100]).unwrap(), 100);
    let (p, _) = sh.netdev_receive().expect("data");
    let data = parse(&p);
    assert_eq!((data.seq, data.len), (synack.seq.wrapping_add(1), 100));

    // TCP_INFO in Linux's layout and units: ESTABLISHED (1), cwnd 10 segments, ssthresh "infinite",
    // one segment unacknowledged, MSS 536 (the SYN offered none), 100 bytes sent.
    let info = sh
        .getsockopt_bytes(fd, libc::IPPROTO_TCP, libc::TCP_INFO)
        .unwrap();
    let u32_at = |at: usize| u32::from_ne_bytes(info[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_ne_bytes(info[at..at + 8].try_into().unwrap());
    assert_eq!((info.len(), info[0], info[1]), (280, 1, 0));
    assert_eq!((u32_at(80), u32_at(76)), (10, 0x7fff_ffff));
    assert_eq!((u32_at(16), u32_at(24)), (536, 1));
    assert_eq!((u32_at(156), u64_at(200)), (1, 100));
    let meminfo = sh
        .getsockopt_bytes(fd, libc::SOL_SOCKET, fastpath_packetdrill::shim::SO_MEMINFO)
        .unwrap();
    assert_eq!(meminfo.len(), 9 * 4);
    assert!(sh
        .getsockopt_bytes(
            fd,
            libc::IPPROTO_TCP,
            fastpath_packetdrill::shim::TCP_CC_INFO
        )
        .unwrap()
        .is_empty());

    // The peer acknowledges and closes; reads see the end of the stream.
    let mut fin = Seg::new(1001);
    fin.ack = Some(synack.seq.wrapping_add(101));
    fin.fin = true;
    sh.netdev_send(&fin.bytes());
    let mut buf = [0u8; 10];
    assert_eq!(sh.read(fd, &mut buf).unwrap(), 0);
    sh.close(fd).unwrap();
    let sent: Vec<Out> = sh.take_sent().iter().map(|p| parse(p)).collect();
    assert!(sent.iter().any(|o| o.fin), "{sent:?}");
    assert!(!sent.iter().any(|o| o.rst), "{sent:?}");
    assert_eq!(sh.close(fd).unwrap_err(), libc::EBADF);
}

/// A non-blocking connect: EINPROGRESS, the SYN, and a reset that makes it ECONNREFUSED.
#[test]
fn nonblocking_connect_refused() {
    let sh = shim();
    let fd = sh
        .socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK,
            libc::IPPROTO_TCP,
        )
        .unwrap();
    let remote: SocketAddr = SocketAddrV4::new(REMOTE, 8080).into();
    assert_eq!(sh.connect(fd, remote).unwrap_err(), libc::EINPROGRESS);
    let (p, _) = sh.netdev_receive().expect("SYN");
    let syn = parse(&p);
    assert!(syn.syn && !syn.ack, "{syn:?}");
    assert_eq!(sh.connect(fd, remote).unwrap_err(), libc::EALREADY);

    let mut rst = Seg::new(0);
    rst.rst = true;
    rst.ack = Some(syn.seq.wrapping_add(1));
    rst.from = 8080;
    rst.to = syn.src_port;
    sh.netdev_send(&rst.bytes());
    assert_eq!(sh.connect(fd, remote).unwrap_err(), libc::ECONNREFUSED);
}

/// The virtual clock: an unanswered SYN is sent again when its timer fires in virtual time, not
/// real time, and `gettimeofday` moves only as the script does.
#[test]
fn syn_retransmits_in_virtual_time() {
    let sh = shim();
    let t0 = sh.now_micros();
    let fd = sh
        .socket(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_TCP)
        .unwrap();
    sh.fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK as i64)
        .unwrap();
    assert_eq!(
        sh.fcntl(fd, libc::F_GETFL, 0).unwrap() & libc::O_NONBLOCK,
        libc::O_NONBLOCK
    );
    assert_eq!(
        sh.connect(fd, SocketAddrV4::new(REMOTE, 8080).into())
            .unwrap_err(),
        libc::EINPROGRESS
    );
    let (first, t1) = sh.netdev_receive().expect("SYN");
    assert!(t1 - t0 < 1000, "the SYN left at once");
    // Nothing queued: receiving runs the clock to the retransmission timer.
    let (again, t2) = sh.netdev_receive().expect("retransmitted SYN");
    assert_eq!(parse(&first).seq, parse(&again).seq);
    let waited = t2 - t1;
    assert!(
        (200_000..=3_000_000).contains(&waited),
        "retransmitted after {waited} us"
    );
    let mut buf = [0u8; 4];
    assert_eq!(sh.read(fd, &mut buf).unwrap_err(), libc::EAGAIN);
    sh.usleep(5_000_000);
    assert!(sh.peek_now() >= t2 + 5_000_000);
}

/// The C table as packetdrill fills and calls it.
#[test]
fn interface_table_from_c() {
    use fastpath_packetdrill::ffi::{packetdrill_interface_init, PacketdrillInterface};
    let mut ifc = std::mem::MaybeUninit::<PacketdrillInterface>::uninit();
    let flags = c"local4=192.168.0.2";
    // SAFETY: `ifc` is writable and `flags` NUL-terminated; init fills every field.
    let ifc = unsafe {
        packetdrill_interface_init(flags.as_ptr(), ifc.as_mut_ptr());
        ifc.assume_init()
    };
    assert!(!ifc.userdata.is_null());
    // SAFETY: calls through the table with the userdata init stored, as packetdrill makes them.
    unsafe {
        let fd = (ifc.socket)(ifc.userdata, libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        assert_eq!((ifc.listen)(ifc.userdata, fd, 1), 0);
        // The exported getsockopt answers for the shim's descriptor (a listener: state LISTEN)...
        let mut info = [0u8; 300];
        let mut len = info.len() as libc::socklen_t;
        let r = fastpath_packetdrill::ffi::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        );
        assert_eq!((r, len, info[0]), (0, 280, 10));
        // ... and passes any other to the C library.
        let real = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        let mut ty: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        let r = fastpath_packetdrill::ffi::getsockopt(
            real,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut ty as *mut libc::c_int).cast(),
            &mut len,
        );
        assert_eq!((r, ty), (0, libc::SOCK_DGRAM));
        libc::close(real);
        assert_eq!(
            (ifc.socket)(ifc.userdata, libc::AF_UNIX, libc::SOCK_STREAM, 0),
            -1
        );
        assert_eq!(*libc::__errno_location(), libc::EAFNOSUPPORT);
        let mut tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        };
        assert_eq!(
            (ifc.gettimeofday)(ifc.userdata, &mut tv, std::ptr::null_mut()),
            0
        );
        assert_eq!((ifc.usleep)(ifc.userdata, 2_000_000), 0);
        let mut tv2 = tv;
        assert_eq!(
            (ifc.gettimeofday)(ifc.userdata, &mut tv2, std::ptr::null_mut()),
            0
        );
        assert!(tv2.tv_sec - tv.tv_sec >= 2);
        assert_eq!((ifc.close)(ifc.userdata, fd), 0);
        (ifc.free)(ifc.userdata);
    }
}

/// A blocking accept on a second thread (as packetdrill runs blocking calls) completes when the main
/// thread's packets finish the handshake, and reports the virtual time it completed at.
#[test]
fn blocking_accept_on_another_thread() {
    let sh = std::sync::Arc::new(shim());
    let lfd = listening(&sh);
    let waiter = {
        let sh = sh.clone();
        std::thread::spawn(move || {
            let r = sh.accept(lfd);
            (r, sh.now_micros())
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(5));
    sh.usleep(100_000);
    let mut syn = Seg::new(1000);
    syn.syn = true;
    sh.netdev_send(&syn.bytes());
    let (p, _) = sh.netdev_receive().expect("SYN-ACK");
    let synack = parse(&p);
    let mut ack = Seg::new(1001);
    ack.ack = Some(synack.seq.wrapping_add(1));
    sh.netdev_send(&ack.bytes());
    let at = sh.peek_now();
    let (r, done) = waiter.join().unwrap();
    let (fd, peer) = r.unwrap();
    assert!(fd >= 0);
    assert_eq!(peer, SocketAddr::from(SocketAddrV4::new(REMOTE, 5000)));
    assert!(
        done <= at + 1_000,
        "completed at {done}, handshake done at {at}"
    );
}

/// An IPv6 socket reaches an IPv4 peer by its v4-mapped address, over IPv4 (packetdrill's
/// ipv4-mapped-ipv6 runs).
#[test]
fn v4_mapped_connect_goes_over_ipv4() {
    let sh = shim();
    let fd = sh
        .socket(libc::AF_INET6, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0)
        .unwrap();
    let remote = std::net::SocketAddrV6::new(REMOTE.to_ipv6_mapped(), 8080, 0, 0);
    assert_eq!(
        sh.connect(fd, remote.into()).unwrap_err(),
        libc::EINPROGRESS
    );
    let (p, _) = sh.netdev_receive().expect("SYN");
    assert_eq!(p[0] >> 4, 4, "an IPv4 packet");
    assert!(parse(&p).syn);
}

/// Socket options set before `connect` reach the SYN (`TCP_MAXSEG`) and the connection
/// (`TCP_NOTSENT_LOWAT`, `TCP_USER_TIMEOUT`, `SO_SNDBUF`), and read back as set.
#[test]
fn options_set_before_connect_reach_the_connection() {
    let sh = shim();
    let fd = sh
        .socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK,
            libc::IPPROTO_TCP,
        )
        .unwrap();
    let tcp = libc::IPPROTO_TCP;
    sh.setsockopt(fd, tcp, libc::TCP_MAXSEG, 1100).unwrap();
    assert_eq!(
        sh.setsockopt(fd, tcp, libc::TCP_MAXSEG, 40),
        Err(libc::EINVAL)
    );
    assert_eq!(
        sh.setsockopt(fd, tcp, libc::TCP_USER_TIMEOUT, -1),
        Err(libc::EINVAL)
    );
    sh.setsockopt(fd, tcp, libc::TCP_USER_TIMEOUT, 3000)
        .unwrap();
    sh.setsockopt(fd, tcp, libc::TCP_NOTSENT_LOWAT, 4000)
        .unwrap();
    sh.setsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, 3000)
        .unwrap();
    assert_eq!(sh.getsockopt(fd, tcp, libc::TCP_MAXSEG), Ok(1100));
    assert_eq!(sh.getsockopt(fd, tcp, libc::TCP_USER_TIMEOUT), Ok(3000));
    assert_eq!(sh.getsockopt(fd, tcp, libc::TCP_NOTSENT_LOWAT), Ok(4000));
    assert_eq!(
        sh.getsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF),
        Ok(6000)
    );
    let remote: SocketAddr = SocketAddrV4::new(REMOTE, 8080).into();
    assert_eq!(sh.connect(fd, remote).unwrap_err(), libc::EINPROGRESS);
    let (p, _) = sh.netdev_receive().expect("SYN");
    let s = SlicedPacket::from_ip(&p).unwrap();
    let Some(TransportSlice::Tcp(t)) = s.transport else {
        panic!("not TCP");
    };
    let mss = t.options_iterator().find_map(|o| match o {
        Ok(etherparse::TcpOptionElement::MaximumSegmentSize(m)) => Some(m),
        _ => None,
    });
    assert_eq!(mss, Some(1100));
    // The handshake's end; then the send buffer takes 6000 bytes, the doubled SO_SNDBUF.
    let mut synack = Seg::new(7000);
    synack.syn = true;
    synack.ack = Some(t.sequence_number().wrapping_add(1));
    synack.from = 8080;
    synack.to = t.source_port();
    sh.netdev_send(&synack.bytes());
    assert_eq!(sh.write(fd, &[1; 10_000]), Ok(6000));
}

/// `IP_TOS` before `connect` reaches the SYN (its DSCP; a stream socket's ECN bits are TCP's), and
/// `IP_MTU_DISCOVER`'s `IP_PMTUDISC_DONT` clears DF; both read back, and values Linux refuses are
/// refused.
#[test]
fn type_of_service_and_path_mtu_discovery_reach_the_syn() {
    let sh = shim();
    let fd = sh
        .socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK,
            libc::IPPROTO_TCP,
        )
        .unwrap();
    let ip = libc::SOL_IP;
    assert_eq!(sh.getsockopt(fd, ip, libc::IP_MTU_DISCOVER), Ok(1));
    sh.setsockopt(fd, ip, libc::IP_TOS, 0xb9).unwrap();
    sh.setsockopt(fd, ip, libc::IP_MTU_DISCOVER, 0).unwrap();
    assert_eq!(
        sh.setsockopt(fd, ip, libc::IP_MTU_DISCOVER, 6),
        Err(libc::EINVAL)
    );
    assert_eq!(sh.getsockopt(fd, ip, libc::IP_TOS), Ok(0xb8));
    assert_eq!(sh.getsockopt(fd, ip, libc::IP_MTU_DISCOVER), Ok(0));
    let remote: SocketAddr = SocketAddrV4::new(REMOTE, 8080).into();
    assert_eq!(sh.connect(fd, remote).unwrap_err(), libc::EINPROGRESS);
    for _ in 0..2 {
        // The SYN and its retransmission.
        let (p, _) = sh.netdev_receive().expect("SYN");
        assert!(parse(&p).syn);
        assert_eq!(p[1], 0xb8, "the DSCP, no ECN bits");
        assert_eq!(p[6] & 0x40, 0, "no DF");
    }
}

/// `TCP_INQ`: after a read, the bytes left; 1 once none are left and the peer's FIN has come (as
/// Linux's `tcp_inq_hint`); nothing with the option off.
#[test]
fn tcp_inq_reports_what_is_left_to_read() {
    let sh = shim();
    let (fd, iss) = accepted(&sh);
    assert_eq!(sh.inq_hint(fd).unwrap(), None, "off by default");
    sh.setsockopt(
        fd,
        libc::IPPROTO_TCP,
        fastpath_packetdrill::shim::TCP_INQ,
        1,
    )
    .unwrap();
    let mut data = Seg::new(1001);
    data.ack = Some(iss.wrapping_add(1));
    data.data = vec![5; 300];
    data.fin = true;
    sh.netdev_send(&data.bytes());
    let mut buf = [0u8; 100];
    assert_eq!(sh.read(fd, &mut buf).unwrap(), 100);
    assert_eq!(sh.inq_hint(fd).unwrap(), Some(200));
    let mut rest = [0u8; 500];
    assert_eq!(sh.read(fd, &mut rest).unwrap(), 200);
    assert_eq!(sh.inq_hint(fd).unwrap(), Some(1), "the FIN counts as one");
}

/// epoll, edge-triggered: a report when added, then only when something happens (data arrives),
/// with the whole ready mask; level-triggered, every wait while ready; the instance closes.
#[test]
fn epoll_reports_edges_and_levels() {
    let sh = shim();
    let (fd, iss) = accepted(&sh);
    let (inn, out, et) = (
        libc::EPOLLIN as u32,
        libc::EPOLLOUT as u32,
        libc::EPOLLET as u32,
    );
    let ep = sh.epoll_create(1).unwrap();
    sh.epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, inn | out | et, 7)
        .unwrap();
    assert_eq!(
        sh.epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, inn, 7),
        Err(libc::EEXIST)
    );
    assert_eq!(sh.epoll_wait(ep, 4, 0).unwrap(), [(out, 7)]);
    assert_eq!(sh.epoll_wait(ep, 4, 0).unwrap(), []);
    let mut data = Seg::new(1001);
    data.ack = Some(iss.wrapping_add(1));
    data.data = vec![1; 100];
    sh.netdev_send(&data.bytes());
    assert_eq!(sh.epoll_wait(ep, 4, 0).unwrap(), [(inn | out, 7)]);
    assert_eq!(sh.epoll_wait(ep, 4, 0).unwrap(), [], "no new data");
    sh.epoll_ctl(ep, libc::EPOLL_CTL_MOD, fd, inn, 9).unwrap();
    assert_eq!(sh.epoll_wait(ep, 4, 0).unwrap(), [(inn, 9)]);
    assert_eq!(
        sh.epoll_wait(ep, 4, 0).unwrap(),
        [(inn, 9)],
        "level-triggered"
    );
    sh.close(ep).unwrap();
    assert_eq!(sh.epoll_wait(ep, 4, 0), Err(libc::EINVAL));
}
