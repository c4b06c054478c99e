//! The link's own tests: receiving a batch and refusing bad frames, offload on transmit, waiting,
//! the descriptor lent out.

use super::testing::{fake_kernel, framed, needs_csum, partial_udp, udp_checksum_verifies};
use super::vnet::VIRTIO_NET_HDR_F_DATA_VALID;
use super::*;

#[test]
fn receive_reads_a_batch_and_refuses_bad_frames() {
    let (mut link, kernel) = fake_kernel(true);
    let good = partial_udp(b"hello, fastpath");
    let plain = VnetHeader::default();
    kernel
        .send(&framed(&needs_csum(20, 6), good.data()))
        .unwrap();
    kernel.send(&[1, 2, 3, 4, 5]).unwrap(); // shorter than the virtio header
    kernel.send(&framed(&plain, &[0x45; 3000])).unwrap(); // past the buffer
    kernel
        .send(&framed(&needs_csum(20, 60), good.data()))
        .unwrap(); // offset outside
    let gso = VnetHeader {
        gso_type: 5,
        gso_size: 0,
        ..plain
    };
    kernel.send(&framed(&gso, good.data())).unwrap();
    let valid = VnetHeader {
        flags: VIRTIO_NET_HDR_F_DATA_VALID,
        ..plain
    };
    for _ in 0..3 {
        kernel.send(&framed(&valid, good.data())).unwrap();
    }
    kernel.send(&framed(&plain, good.data())).unwrap();

    let mut batch = Vec::new();
    assert_eq!(link.receive(&mut batch, 3), 3);
    assert_eq!(link.receive(&mut batch, 32), 2);
    assert_eq!(link.receive(&mut batch, 32), 0);
    let states: Vec<_> = batch.iter().map(|p| p.meta.checksum()).collect();
    assert_eq!(
        states,
        [
            ChecksumOffload::Partial {
                start: 20,
                offset: 6
            },
            ChecksumOffload::Valid,
            ChecksumOffload::Valid,
            ChecksumOffload::Valid,
            ChecksumOffload::None,
        ]
    );
    for p in &batch {
        assert_eq!(p.data(), good.data());
        assert_eq!(
            p.headroom(),
            HEADROOM,
            "the packet sits where the stack expects it"
        );
    }
    let s = link.stats();
    assert_eq!(
        (s.rx_packets, s.rx_partial, s.rx_data_valid),
        (5, 1, 3),
        "{s:?}"
    );
    assert_eq!(s.rx_drop_truncated, 1);
    assert_eq!(s.rx_drop_oversize, 1);
    assert_eq!(s.rx_drop_bad_checksum_offsets, 1);
    assert_eq!(s.rx_drop_gso, 1);
    assert_eq!(s.rx_dropped(), 4);
    assert_eq!(link.handle().stats(), s, "published to handles");
}

#[test]
fn transmit_asks_the_kernel_to_finish_partial_checksums_only_with_offload() {
    for offload in [true, false] {
        let (mut link, kernel) = fake_kernel(offload);
        let mut p = partial_udp(b"out we go");
        p.meta.set_checksum(ChecksumOffload::Partial {
            start: 20,
            offset: 6,
        });
        let sent = p.data().to_vec();
        let mut batch = vec![p, partial_udp(b"plain")];
        assert_eq!(link.transmit(&mut batch), 0);
        assert!(batch.is_empty());
        let mut frame = [0u8; 2048];
        let n = kernel.recv(&mut frame).unwrap();
        let header = VnetHeader::parse(frame[..VNET_HEADER_LEN].try_into().unwrap());
        let mut got = PacketBuf::from_slice(&frame[VNET_HEADER_LEN..n]);
        if offload {
            assert_eq!(header, needs_csum(20, 6));
            assert_eq!(got.data(), &sent[..], "the packet as the stack left it");
            complete_checksum(&mut got, 20, 6);
        } else {
            assert_eq!(header, VnetHeader::default());
        }
        assert!(udp_checksum_verifies(&got));
        let n = kernel.recv(&mut frame).unwrap();
        assert_eq!(&frame[..VNET_HEADER_LEN], &VnetHeader::default().emit());
        assert_eq!(n, VNET_HEADER_LEN + 20 + 8 + 5);
        let s = link.stats();
        assert_eq!(s.tx_packets, 2);
        assert_eq!(s.tx_offloaded, offload as u64);
        assert_eq!(s.tx_checksums_completed, !offload as u64);
    }
}

#[test]
fn wait_wakes_when_a_packet_comes() {
    let (link, kernel) = fake_kernel(true);
    assert!(!link.wait(Some(Duration::from_millis(1))).unwrap());
    kernel
        .send(&framed(&VnetHeader::default(), &[0x45; 40]))
        .unwrap();
    assert!(link.handle().wait(Some(Duration::from_secs(5))).unwrap());
}

#[test]
fn the_descriptor_lent_out_is_the_one_the_link_reads() {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let (mut link, kernel) = fake_kernel(true);
    let handle = link.handle();
    assert_eq!(link.as_raw_fd(), handle.as_raw_fd());
    assert_eq!(link.as_fd().as_raw_fd(), link.as_raw_fd());
    let flags = OFlag::from_bits_truncate(fcntl(link.as_fd(), FcntlArg::F_GETFL).unwrap());
    assert!(flags.contains(OFlag::O_NONBLOCK), "{flags:?}");
    fn readable(fd: BorrowedFd<'_>) -> bool {
        let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::from(100u8)).unwrap() == 1
            && fds[0].revents().unwrap().contains(PollFlags::POLLIN)
    }
    assert!(!readable(link.as_fd()), "nothing sent yet");
    kernel
        .send(&framed(&VnetHeader::default(), partial_udp(b"ping").data()))
        .unwrap();
    assert!(readable(link.as_fd()));
    assert!(readable(handle.as_fd()));
    // What made it readable is what the link receives; then it is quiet again.
    let mut batch = Vec::new();
    assert_eq!(link.receive(&mut batch, 8), 1);
    assert_eq!(batch[0].data(), partial_udp(b"ping").data());
    assert!(!readable(link.as_fd()));
}
