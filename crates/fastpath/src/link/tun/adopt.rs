//! [`TunLink::from_fd`]: a link over a TUN descriptor someone else opened (a VPN app's, a
//! privileged helper's), adapted to how it was opened (`TUNGETIFF`).

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use super::{sys, TunConfig, TunLink, MAX_MTU, MIN_MTU, VNET_HEADER_LEN};

impl TunLink {
    /// A link over `fd`, an open TUN descriptor attached to an interface (`TUNSETIFF` done), which
    /// the link owns from now on: closed when the link and its handles are dropped.
    ///
    /// For a descriptor someone else opened: a VPN app's (Android's `VpnService` hands one over), a
    /// privileged helper's passed over a Unix socket. The link asks the kernel (`TUNGETIFF`) how it
    /// was opened and adapts:
    ///
    /// - `IFF_TUN` is required (a TAP device carries Ethernet frames, which the stack does not
    ///   read), and `IFF_NO_PI` too (without it every packet has a 4-byte protocol header in front;
    ///   VPN apps set it, as does `ip tuntap add ... mode tun` unless told `pi`).
    /// - With `IFF_VNET_HDR` the link works as one it opened itself: a virtio-net header on every
    ///   packet (its length set here with `TUNSETVNETHDRSZ`), checksum offload and TCP segmentation
    ///   offload both ways when [`TunConfig::offload`] asks (probed with `TUNSETOFFLOAD`), UDP
    ///   segmentation offload on receive if [`TunConfig::uso`] asks and the kernel has it.
    /// - Without it (Android's descriptors, and most others), packets are bare IP packets: no
    ///   offload of any kind, every checksum computed and checked by the stack, and nothing larger
    ///   than the MTU either way.
    ///
    /// The descriptor is made non-blocking. [`TunConfig::mtu`] must be the interface's MTU (the link
    /// cannot set or read it: the interface may live in a namespace the caller is not in): a packet
    /// larger than it is dropped as oversize. `name` and `netns` of the configuration are not used;
    /// the name is the kernel's. The interface's addresses, routes and state (up) are the caller's
    /// business, as for [`TunLink::open`].
    ///
    /// Fails, closing `fd`, if it is not a TUN descriptor (`TUNGETIFF` fails), is a TAP device, lacks
    /// `IFF_NO_PI`, or `config.mtu` is out of range.
    pub fn from_fd(fd: OwnedFd, config: &TunConfig) -> io::Result<TunLink> {
        if !(MIN_MTU..=MAX_MTU).contains(&config.mtu) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("MTU {} outside {MIN_MTU}..={MAX_MTU}", config.mtu),
            ));
        }
        let (name, flags) = sys::get_iff(fd.as_fd())?;
        let kind = flags & (libc::IFF_TUN | libc::IFF_TAP);
        if kind != libc::IFF_TUN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{name} is not a TUN device (IFF_TUN): a TAP device carries Ethernet frames"
                ),
            ));
        }
        if flags & libc::IFF_NO_PI == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{name} was opened without IFF_NO_PI: its packets carry a protocol header the \
                     link does not read; open it with IFF_TUN | IFF_NO_PI (optionally IFF_VNET_HDR)"
                ),
            ));
        }
        sys::set_nonblocking(fd.as_fd())?;
        let vnet = flags & libc::IFF_VNET_HDR != 0;
        if !vnet {
            let mut link = TunLink::over(fd, name, config.mtu, false);
            link.vnet_len = 0;
            if config.io_uring {
                let _ = link.enable_uring();
            }
            return Ok(link);
        }
        sys::set_vnet_header_len(fd.as_fd(), VNET_HEADER_LEN)?;
        let offload = config.offload;
        let uso_available =
            offload && sys::set_offload(fd.as_fd(), sys::TUN_F_CSUM | sys::TUN_F_USO).is_ok();
        let tso_available = offload
            && sys::set_offload(
                fd.as_fd(),
                sys::TUN_F_CSUM | sys::TUN_F_TSO4 | sys::TUN_F_TSO6,
            )
            .is_ok();
        let uso = config.uso && uso_available;
        let mut offloads = 0;
        if offload {
            offloads |= sys::TUN_F_CSUM;
        }
        if uso {
            offloads |= sys::TUN_F_USO;
        }
        if tso_available {
            offloads |= sys::TUN_F_TSO4 | sys::TUN_F_TSO6;
        }
        sys::set_offload(fd.as_fd(), offloads)?;
        let mut link = TunLink::over(fd, name, config.mtu, offload);
        link.uso_available = uso_available;
        if uso {
            link.enable_uso();
        }
        if tso_available {
            link.enable_tso_rx();
        }
        if config.io_uring {
            let _ = link.enable_uring();
        }
        Ok(link)
    }

    /// Whether packets carry a virtio-net header (a descriptor opened with `IFF_VNET_HDR`, as
    /// [`TunLink::open`] opens them): offloads are possible only then.
    pub fn vnet_header(&self) -> bool {
        self.vnet_len != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{ChecksumOffload, PacketBuf};
    use crate::link::tun::testing::partial_udp;
    use crate::link::Link;

    #[test]
    fn a_descriptor_that_is_not_tun_is_refused() {
        let (ours, _theirs) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let e = TunLink::from_fd(OwnedFd::from(ours), &TunConfig::default()).unwrap_err();
        assert!(e.to_string().contains("TUNGETIFF"), "{e}");
    }

    /// A link without virtio-net headers (as `from_fd` makes for a plain descriptor), over a datagram
    /// socket pair playing the kernel: packets go out and come in bare, checksums completed here.
    #[test]
    fn a_plain_descriptor_carries_bare_packets() {
        let (ours, kernel) = std::os::unix::net::UnixDatagram::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        kernel.set_nonblocking(true).unwrap();
        let mut link = TunLink::over(OwnedFd::from(ours), "plain0".into(), 1500, false);
        link.vnet_len = 0;
        assert!(!link.vnet_header());
        assert!(!link.capabilities().tx_checksum_offload);
        let good = partial_udp(b"bare");
        let mut p = partial_udp(b"bare");
        p.meta.set_checksum(ChecksumOffload::Partial {
            start: 20,
            offset: 6,
        });
        assert_eq!(link.transmit(&mut vec![p]), 0);
        let mut frame = [0u8; 2048];
        let n = kernel.recv(&mut frame).unwrap();
        assert_eq!(n, good.len(), "no header in front");
        assert!(crate::link::tun::testing::udp_checksum_verifies(
            &PacketBuf::from_slice(&frame[..n])
        ));
        kernel.send(&frame[..n]).unwrap();
        kernel.send(&[0x45; 3000]).unwrap(); // past the buffer
        let mut batch = Vec::new();
        assert_eq!(link.receive(&mut batch, 8), 1);
        assert_eq!(batch[0].data(), &frame[..n]);
        assert_eq!(batch[0].meta.checksum(), ChecksumOffload::None);
        assert_eq!(link.stats().rx_drop_oversize, 1);
        assert_eq!(link.stats().tx_bytes, n as u64);
    }
}
