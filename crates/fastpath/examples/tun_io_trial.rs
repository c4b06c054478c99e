//! How a TUN device is best read and written: a system call per packet, or io_uring. Linux only,
//! needs root. Two experiments:
//!
//! `sudo target/release/examples/tun_io_trial reads [seconds] [rounds] [senders]` (defaults 3, 3, 1)
//! makes TUN device `fptrial0` (10.77.0.1/24, no offloads, no packet information) and has `senders`
//! kernel UDP sockets send 64-byte datagrams through it as fast as they can, to 10.77.0.2 onwards,
//! while one thread reads the device in one of four ways, in turn, round after round:
//!
//! - `read`: a `read` per packet on a non-blocking descriptor, `poll` when it is empty (what
//!   [`TunLink`](fastpath::link::tun::TunLink) does);
//! - `ring defer`: one multishot read (`IORING_OP_READ_MULTISHOT`, Linux 6.7) into 256 provided
//!   2 KiB buffers, on a ring with `IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN` (Linux
//!   6.1): an arrival only adds to a list that the reader works through when it enters the ring;
//! - `ring coop`: the same with `IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG` (Linux
//!   5.19): the arriving packet's sender queues work for the reader without interrupting it;
//! - `ring plain`: the same on a ring with neither: the sender's thread queues work for the
//!   reader and kicks it.
//!
//! The reader waits in `io_uring_enter` for at least one completion and hands the buffers back in
//! bulk. Printed: datagrams read and sent per second, each round and the medians.
//!
//! `sudo target/release/examples/tun_io_trial writes [packets] [rounds]` (defaults 200000, 7) writes
//! `packets` 60-byte IPv4 packets to the same device (addressed where the kernel drops them), timed
//! three ways in turn, round after round: a `write` each; one write per `io_uring_enter`; 32 writes
//! per `io_uring_enter` (what the link does with a batch). Printed: ns per packet, the medians.
//!
//! The README's "Reads through io_uring" says what they found. The device is deleted when the program
//! ends (with the process's descriptor).

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("tun_io_trial: Linux only");
}

#[cfg(target_os = "linux")]
fn main() -> std::io::Result<()> {
    trial::main()
}

#[cfg(target_os = "linux")]
mod trial {
    use std::alloc::Layout;
    use std::io;
    use std::net::UdpSocket;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    use io_uring::{cqueue, opcode, types, IoUring};

    const DEVICE: &str = "fptrial0";
    /// Provided buffers, and their size.
    const BUFFERS: u16 = 256;
    const BUFFER_LEN: usize = 2048;
    /// The provided buffers' group.
    const GROUP: u16 = 7;

    const MODES: [&str; 4] = ["read", "ring defer", "ring coop", "ring plain"];

    pub fn main() -> io::Result<()> {
        let mut args = std::env::args().skip(1);
        let what = args.next().unwrap_or_default();
        let mut args = args.map(|a| a.parse::<u64>().expect("a number"));
        match what.as_str() {
            "reads" => reads(
                args.next().unwrap_or(3),
                args.next().unwrap_or(3),
                args.next().unwrap_or(1),
            ),
            "writes" => writes(args.next().unwrap_or(200_000), args.next().unwrap_or(7)),
            _ => {
                eprintln!("usage: tun_io_trial reads [seconds] [rounds] [senders] | writes [packets] [rounds]");
                std::process::exit(2);
            }
        }
    }

    /// The device, up, at 10.77.0.1/24.
    fn device() -> io::Result<OwnedFd> {
        let fd = open_tun(DEVICE)?;
        let up = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ip addr add 10.77.0.1/24 dev {DEVICE} && ip link set {DEVICE} up txqueuelen 1000"
            ))
            .status()?;
        assert!(up.success(), "could not bring {DEVICE} up");
        Ok(fd)
    }

    /// Times `packets` writes of a 60-byte packet four ways, `rounds` times interleaved.
    fn writes(packets: u64, rounds: u64) -> io::Result<()> {
        const WAYS: [&str; 3] = ["write", "ring, one per enter", "ring, 32 per enter"];
        let fd = device()?;
        // From 10.77.0.2 to 10.98.0.9, which the host does not route: the kernel drops it.
        let mut packet = [0u8; 60];
        packet[0] = 0x45;
        packet[3] = 60;
        packet[8] = 64;
        packet[9] = 17;
        packet[12..16].copy_from_slice(&[10, 77, 0, 2]);
        packet[16..20].copy_from_slice(&[10, 98, 0, 9]);
        let mut ring = IoUring::new(64)?;
        let raw = fd.as_raw_fd();
        let plain = || {
            // SAFETY: `packet` is valid for reads of its length for the whole call.
            let n = unsafe { libc::write(raw, packet.as_ptr().cast(), packet.len()) };
            assert_eq!(n, packet.len() as isize, "{}", io::Error::last_os_error());
        };
        let through_ring = |ring: &mut IoUring, k: u64| -> io::Result<()> {
            for _ in 0..k {
                let op = opcode::Write::new(types::Fd(raw), packet.as_ptr(), packet.len() as u32)
                    .build();
                // SAFETY: `packet` outlives the write: it completes before this function returns.
                unsafe { ring.submission().push(&op) }.expect("room for 32");
            }
            ring.submit_and_wait(k as usize)?;
            for cqe in ring.completion() {
                assert_eq!(cqe.result(), packet.len() as i32, "a whole write");
            }
            Ok(())
        };
        let mut ns: Vec<Vec<f64>> = vec![Vec::new(); WAYS.len()];
        for _ in 0..rounds {
            for (way, times) in ns.iter_mut().enumerate() {
                let start = Instant::now();
                match way {
                    0 => (0..packets).for_each(|_| plain()),
                    1 => {
                        for _ in 0..packets {
                            through_ring(&mut ring, 1)?;
                        }
                    }
                    _ => {
                        for _ in 0..packets / 32 {
                            through_ring(&mut ring, 32)?;
                        }
                    }
                }
                let n = if way == 2 { packets / 32 * 32 } else { packets };
                times.push(start.elapsed().as_nanos() as f64 / n as f64);
            }
        }
        for (way, times) in WAYS.iter().zip(ns) {
            println!("{way:22} {:6.0} ns per packet", median(times));
        }
        Ok(())
    }

    /// Reads from `senders` kernel senders, four ways, `rounds` times interleaved.
    fn reads(seconds: u64, rounds: u64, senders: u64) -> io::Result<()> {
        let senders = senders.max(1);
        let fd = device()?;
        println!(
            "{senders} sender(s), 64-byte datagrams, {seconds} s per run, {rounds} interleaved rounds"
        );
        let mut results: Vec<Vec<(f64, f64)>> = vec![Vec::new(); MODES.len()];
        for _ in 0..rounds {
            for (mode, name) in MODES.iter().enumerate() {
                let (read, sent) = run(&fd, mode, seconds, senders)?;
                println!("{name:12} read {read:10.0}/s   sent {sent:10.0}/s");
                results[mode].push((read, sent));
            }
        }
        for (mode, name) in MODES.iter().enumerate() {
            let read = median(results[mode].iter().map(|r| r.0).collect());
            let sent = median(results[mode].iter().map(|r| r.1).collect());
            let base = median(results[0].iter().map(|r| r.0).collect());
            println!(
                "median {name:12} read {read:10.0}/s ({:.2}x read)   sent {sent:10.0}/s",
                read / base
            );
        }
        Ok(())
    }

    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    /// One run: senders started, the reader of `mode` on this thread for `seconds`. Datagrams read and
    /// sent per second.
    fn run(fd: &OwnedFd, mode: usize, seconds: u64, senders: u64) -> io::Result<(f64, f64)> {
        let stop = AtomicBool::new(false);
        let counting = AtomicBool::new(false);
        let sent = AtomicU64::new(0);
        let read = AtomicU64::new(0);
        let mut elapsed = 0.0;
        std::thread::scope(|scope| -> io::Result<()> {
            for i in 0..senders {
                let (stop, counting, sent) = (&stop, &counting, &sent);
                scope.spawn(move || {
                    let socket = UdpSocket::bind("10.77.0.1:0").expect("a sender's socket");
                    let to = format!("10.77.0.{}:9", 2 + i);
                    let data = [0u8; 64];
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let ok = socket.send_to(&data, &to).is_ok();
                        n += u64::from(ok && counting.load(Ordering::Relaxed));
                    }
                    sent.fetch_add(n, Ordering::Relaxed);
                });
            }
            std::thread::sleep(Duration::from_millis(200));
            // Counted from here, by the senders too.
            let start = Instant::now();
            counting.store(true, Ordering::Relaxed);
            scope.spawn(|| {
                std::thread::sleep(Duration::from_secs(seconds));
                stop.store(true, Ordering::Relaxed);
            });
            let result = if mode == 0 {
                read_each(fd, &stop, &read)
            } else {
                read_ring(fd, mode, &stop, &read)
            };
            elapsed = start.elapsed().as_secs_f64();
            stop.store(true, Ordering::Relaxed);
            result
        })?;
        Ok((
            read.load(Ordering::Relaxed) as f64 / elapsed,
            sent.load(Ordering::Relaxed) as f64 / elapsed,
        ))
    }

    /// A `read` per packet; `poll` (100 ms at most) when there is none.
    fn read_each(fd: &OwnedFd, stop: &AtomicBool, count: &AtomicU64) -> io::Result<()> {
        let mut buf = vec![0u8; BUFFER_LEN];
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            // SAFETY: `buf` is valid for writes of its length for the whole call.
            let r = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if r > 0 {
                n += 1;
                continue;
            }
            let mut p = libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid `pollfd` for the call's duration.
            unsafe { libc::poll(&mut p, 1, 100) };
        }
        count.store(n, Ordering::Relaxed);
        Ok(())
    }

    /// One multishot read into provided buffers, on a ring set up as `mode` says.
    fn read_ring(
        fd: &OwnedFd,
        mode: usize,
        stop: &AtomicBool,
        count: &AtomicU64,
    ) -> io::Result<()> {
        let mut builder = IoUring::builder();
        match mode {
            1 => {
                builder.setup_single_issuer().setup_defer_taskrun();
            }
            2 => {
                builder.setup_coop_taskrun().setup_taskrun_flag();
            }
            _ => {}
        }
        // Declared before the ring, so dropped after it, on every path out of this function.
        let mut provided = Provided::new();
        let mut ring: IoUring = builder.build(64)?;
        // SAFETY: the entries (and the buffers they point into) outlive the ring: `provided` is
        // dropped after `ring`.
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                provided.entries as u64,
                BUFFERS,
                GROUP,
                0,
            )?
        };
        let arm = |ring: &mut IoUring| {
            let op = opcode::ReadMulti::new(types::Fd(fd.as_raw_fd()), 0, GROUP)
                .build()
                .user_data(1);
            // SAFETY: the read writes only into provided buffers, which outlive the ring.
            unsafe { ring.submission().push(&op) }.expect("room in an empty queue");
        };
        arm(&mut ring);
        let timeout = types::Timespec::new().nsec(100_000_000);
        let args = types::SubmitArgs::new().timespec(&timeout);
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            match ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR)) => {}
                Err(e) => return Err(e),
            }
            let mut rearm = false;
            for cqe in ring.completion() {
                // Whatever the result, a buffer the read took goes back.
                if let Some(bid) = cqueue::buffer_select(cqe.flags()) {
                    provided.provide(bid);
                }
                if cqe.result() > 0 {
                    n += 1;
                } else if cqe.result() < 0 && cqe.result() != -libc::ENOBUFS {
                    return Err(io::Error::from_raw_os_error(-cqe.result()));
                }
                rearm |= !cqueue::more(cqe.flags());
            }
            provided.publish();
            if rearm {
                arm(&mut ring);
            }
        }
        count.store(n, Ordering::Relaxed);
        Ok(())
    }

    /// The provided buffers and the page-aligned ring of entries that lends them to the kernel,
    /// both freed on drop. Only raw pointers reach them: the kernel writes into the buffers and reads
    /// the entries while we hold them.
    struct Provided {
        buffers: *mut u8,
        entries: *mut types::BufRingEntry,
        layout: Layout,
        tail: u16,
    }

    impl Provided {
        /// Every buffer in the ring, published.
        fn new() -> Provided {
            let buffers =
                Box::into_raw(vec![0u8; usize::from(BUFFERS) * BUFFER_LEN].into_boxed_slice());
            let layout =
                Layout::from_size_align(usize::from(BUFFERS) * 16, 4096).expect("a valid layout");
            // SAFETY: the layout's size is not zero.
            let entries = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<types::BufRingEntry>();
            assert!(!entries.is_null(), "out of memory");
            let mut provided = Provided {
                buffers: buffers.cast::<u8>(),
                entries,
                layout,
                tail: 0,
            };
            for bid in 0..BUFFERS {
                provided.provide(bid);
            }
            provided.publish();
            provided
        }

        /// Puts buffer `bid` in the entry at the tail (seen by the kernel once published).
        fn provide(&mut self, bid: u16) {
            let index = usize::from(self.tail % BUFFERS);
            // SAFETY: `bid` < `BUFFERS` (the kernel returns only ids we gave), so the address is
            // inside the buffers' allocation; the entry is one of `BUFFERS`, 16 bytes each: the
            // address (8), length (4) and id (2). Its last 2 bytes, the ring's tail in entry 0, are
            // left alone. The kernel reads no entry past the published tail.
            unsafe {
                let addr = self.buffers.add(usize::from(bid) * BUFFER_LEN) as u64;
                let entry = self.entries.add(index).cast::<u8>();
                entry.cast::<u64>().write_volatile(addr);
                entry.add(8).cast::<u32>().write_volatile(BUFFER_LEN as u32);
                entry.add(12).cast::<u16>().write_volatile(bid);
            }
            self.tail = self.tail.wrapping_add(1);
        }

        /// Hands the kernel the entries provided so far.
        fn publish(&self) {
            // SAFETY: the tail is the last 2 bytes of entry 0, aligned for a `u16`, written only
            // here; the release store orders the entries' writes before it, as the kernel expects.
            unsafe {
                let tail = types::BufRingEntry::tail(self.entries).cast_mut();
                (*tail.cast::<AtomicU16>()).store(self.tail, Ordering::Release);
            }
        }
    }

    impl Drop for Provided {
        fn drop(&mut self) {
            // SAFETY: both allocated in `new` as they are freed here, once; the ring that used them
            // was dropped first.
            unsafe {
                std::alloc::dealloc(self.entries.cast(), self.layout);
                drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                    self.buffers,
                    usize::from(BUFFERS) * BUFFER_LEN,
                )));
            }
        }
    }

    /// A TUN device named `name` (no packet information), non-blocking.
    fn open_tun(name: &str) -> io::Result<OwnedFd> {
        // SAFETY: a NUL-terminated path; the result is checked.
        let raw = unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor just opened and owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // struct ifreq: the name (16 bytes), then the flags.
        let mut ifr = [0u8; 40];
        ifr[..name.len()].copy_from_slice(name.as_bytes());
        ifr[16..18].copy_from_slice(&((libc::IFF_TUN | libc::IFF_NO_PI) as i16).to_ne_bytes());
        // SAFETY: TUNSETIFF reads and writes a `struct ifreq`, which `ifr` is large enough for.
        if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, ifr.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: plain fcntl on an owned descriptor.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(fd)
    }
}
