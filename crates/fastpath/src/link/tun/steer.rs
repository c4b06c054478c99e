//! Steering a multi-queue TUN interface: which queue (and so which stack) the kernel hands each packet.
//!
//! With `IFF_MULTI_QUEUE`, the kernel picks a queue for every packet it sends into the interface. Left
//! to itself it uses the flow's hash, with a short memory (seconds, at most 4,096 flows) of which queue
//! last wrote a flow ("automq"). That is not enough for a connection one stack opened (an active
//! open): its replies may land on another stack, which knows nothing of it. In
//! `tests/tun_queues.rs`, without the program below, stack 0's connections got none of their echoes
//! in 3 cases of 4. So fastpath attaches a small eBPF program (built by `program`) that decides
//! deterministically, from the packet alone:
//!
//! 1. A fragment of an IPv4 datagram (more-fragments set, or an offset) goes by its identification,
//!    so every fragment of one datagram meets in one stack's reassembly.
//! 2. A TCP or UDP packet (IPv4, or IPv6 with no extension header) whose destination port (fastpath's
//!    side) lies in the stacks' ephemeral range goes to the queue whose share of that range holds it
//!    ([`ephemeral_share`]): the replies of a connection a stack opened come back to that stack.
//! 3. Any other TCP or UDP packet goes by a hash of the sender's address and port and the destination
//!    port: a connection to a listening port (which every stack has) stays on one queue, and many
//!    connections spread over all of them.
//! 4. Everything else (ICMP, IPv6 with extension headers, anything malformed) goes to queue 0.
//!
//! On a TAP interface the program reads past the Ethernet header: an IPv4 or IPv6 frame (no VLAN
//! tag) is steered by the same rule, and every other frame (ARP, a tagged frame) goes to queue 0.
//! Neighbour discovery is ICMPv6, so it goes there too; the stacks of the other queues learn what
//! queue 0 hears through a [`NeighborBoard`](crate::ethernet::NeighborBoard).
//!
//! What the rule cannot do, being stateless: a fragment carries no ports after the first, so a
//! fragmented datagram reaches the stack its identification picks. That is right for a socket every
//! stack has (a server's), but a fragmented reply to a socket one stack opened may land on another,
//! which answers port unreachable; and IPv6 fragments all go to queue 0. Only fragmented traffic to
//! sockets of one stack is affected.
//!
//! The program returns a number and the kernel takes it modulo the number of queues. It is built here
//! instruction by instruction (about fifty eBPF instructions; no compiler, no library), and
//! its unit tests run it on an interpreter of the few instructions it uses, so the rule is checked
//! without a kernel; `tests/tun_queues.rs` (in `fastpath-cli`) checks it with one.

use std::ops::RangeInclusive;

use crate::link::bpf::*;

/// The ports of `ephemeral` that the stack on queue `queue` (of `queues`) hands out: a contiguous
/// share, the shares in queue order. Give it to that stack's
/// [`StackConfig::ephemeral_ports`](crate::StackConfig::ephemeral_ports). `None` when the range has
/// fewer ports than there are queues, or `queue` is out of range.
pub fn ephemeral_share(
    ephemeral: &RangeInclusive<u16>,
    queue: usize,
    queues: usize,
) -> Option<RangeInclusive<u16>> {
    let (lo, hi) = (
        usize::from(*ephemeral.start()),
        usize::from(*ephemeral.end()),
    );
    let len = (hi + 1).checked_sub(lo)?;
    if queues == 0 || queue >= queues || len < queues {
        return None;
    }
    let span = len.div_ceil(queues);
    let start = lo + queue * span;
    let end = (start + span - 1).min(hi);
    (start <= end).then_some(start as u16..=end as u16)
}

/// The steering program for `queues` queues whose stacks share `ephemeral` by [`ephemeral_share`]
/// (see the [module documentation](self) for the rule), for a TUN interface's packets (`ethernet`
/// false) or a TAP interface's frames.
pub(crate) fn program(ephemeral: &RangeInclusive<u16>, queues: usize, ethernet: bool) -> Vec<Insn> {
    let (lo, hi) = (i32::from(*ephemeral.start()), i32::from(*ephemeral.end()));
    let span = ((hi - lo + 1).max(1) as usize).div_ceil(queues.max(1)) as i32;
    // Where the IP header starts.
    let ip = if ethernet { 14 } else { 0 };
    let mut a = Asm::default();
    let (v4, v6, l4, ports, hash, fragment, zero) = (
        a.label(),
        a.label(),
        a.label(),
        a.label(),
        a.label(),
        a.label(),
        a.label(),
    );
    a.op(ALU64 | MOV | X, R6, R1, 0);
    if ethernet {
        // Only untagged IPv4 and IPv6 frames are steered; ARP and the rest go to queue 0.
        let ip_frame = a.label();
        a.load_abs(H, 12);
        a.jump(JEQ, R0, 0x0800, ip_frame);
        a.jump(JEQ, R0, 0x86dd, ip_frame);
        a.jump(JA, 0, 0, zero);
        a.place(ip_frame);
    }
    // The version.
    a.load_abs(B, ip);
    a.op(ALU64 | MOV | X, R7, R0, 0);
    a.op(ALU64 | RSH | K, R7, 0, 4);
    a.jump(JEQ, R7, 4, v4);
    a.jump(JEQ, R7, 6, v6);
    a.jump(JA, 0, 0, zero);

    // IPv4: r7 = where the transport header starts, r8 = protocol, r9 = source address.
    a.place(v4);
    a.op(ALU64 | AND | K, R0, 0, 0x0f);
    a.op(ALU64 | LSH | K, R0, 0, 2);
    a.op(ALU64 | ADD | K, R0, 0, ip);
    a.op(ALU64 | MOV | X, R7, R0, 0);
    a.load_abs(H, ip + 6);
    a.op(ALU64 | AND | K, R0, 0, 0x3fff);
    a.jump(JNE, R0, 0, fragment);
    a.load_abs(B, ip + 9);
    a.op(ALU64 | MOV | X, R8, R0, 0);
    a.load_abs(W, ip + 12);
    a.op(ALU64 | MOV | X, R9, R0, 0);
    a.jump(JA, 0, 0, l4);

    // IPv6: the transport header right behind the fixed one; r9 = the source address's last word.
    a.place(v6);
    a.op(ALU64 | MOV | K, R7, 0, ip + 40);
    a.load_abs(B, ip + 6);
    a.op(ALU64 | MOV | X, R8, R0, 0);
    a.load_abs(W, ip + 8 + 12);
    a.op(ALU64 | MOV | X, R9, R0, 0);

    a.place(l4);
    a.jump(JEQ, R8, 6, ports);
    a.jump(JEQ, R8, 17, ports);
    a.jump(JA, 0, 0, zero);

    // r0 = destination port (fastpath's); in the ephemeral range, its share decides.
    a.place(ports);
    a.load_ind(H, R7, 2);
    a.jump(JLT, R0, lo, hash);
    a.jump(JGT, R0, hi, hash);
    a.op(ALU64 | SUB | K, R0, 0, lo);
    a.op(ALU64 | DIV | K, R0, 0, span);
    a.op(JMP | EXIT, 0, 0, 0);

    // Otherwise a multiplicative hash of (source address, source port, destination port), its top
    // 16 bits (the kernel keeps 16 bits of the result).
    a.place(hash);
    a.op(ALU64 | MOV | X, R8, R0, 0);
    a.load_ind(H, R7, 0);
    a.op(ALU64 | LSH | K, R0, 0, 16);
    a.op(ALU64 | OR | X, R0, R8, 0);
    a.op(ALU64 | XOR | X, R0, R9, 0);
    // Two rounds, so that the low bits the kernel's modulo looks at depend on every input bit
    // (one round leaves bit 16 a function of the low 17 input bits, and Linux's connect() prefers
    // even ports).
    a.op(ALU | MUL | K, R0, 0, 0x9e37_79b1_u32 as i32);
    a.op(ALU64 | MOV | X, R8, R0, 0);
    a.op(ALU | RSH | K, R8, 0, 15);
    a.op(ALU | XOR | X, R0, R8, 0);
    a.op(ALU | MUL | K, R0, 0, 0x9e37_79b1_u32 as i32);
    a.op(ALU | RSH | K, R0, 0, 16);
    a.op(JMP | EXIT, 0, 0, 0);

    a.place(fragment);
    a.load_abs(H, ip + 4);
    a.op(JMP | EXIT, 0, 0, 0);

    a.place(zero);
    a.op(ALU64 | MOV | K, R0, 0, 0);
    a.op(JMP | EXIT, 0, 0, 0);
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `prog` on `packet` as the kernel would for the instructions [`program`] uses: `None` where
    /// a packet load falls outside the packet (the kernel then returns 0).
    fn run(prog: &[Insn], packet: &[u8]) -> u32 {
        let mut r = [0u64; 11];
        let mut pc = 0usize;
        let load = |at: i64, size: u8| -> Option<u64> {
            let n = match size {
                B => 1,
                H => 2,
                _ => 4,
            };
            let at = usize::try_from(at).ok()?;
            let bytes = packet.get(at..at + n)?;
            Some(bytes.iter().fold(0u64, |v, &b| (v << 8) | u64::from(b)))
        };
        for _ in 0..1000 {
            let i = prog[pc];
            pc += 1;
            let (class, d, s) = (i.code & 0x07, usize::from(i.dst), usize::from(i.src));
            let imm = i.imm as i64 as u64;
            match class {
                LD => {
                    let base = if i.code & 0xe0 == IND { r[s] as i64 } else { 0 };
                    match load(base + i64::from(i.imm), i.code & 0x18) {
                        Some(v) => r[0] = v,
                        None => return 0,
                    }
                }
                ALU | ALU64 => {
                    let v = if i.code & X != 0 { r[s] } else { imm };
                    let out = match i.code & 0xf0 {
                        MOV => v,
                        ADD => r[d].wrapping_add(v),
                        SUB => r[d].wrapping_sub(v),
                        MUL => r[d].wrapping_mul(v),
                        DIV => r[d] / v,
                        OR => r[d] | v,
                        AND => r[d] & v,
                        LSH => r[d] << v,
                        RSH if class == ALU => u64::from((r[d] as u32) >> (v as u32)),
                        RSH => r[d] >> v,
                        XOR => r[d] ^ v,
                        op => panic!("op {op:#x} not interpreted"),
                    };
                    r[d] = if class == ALU { out & 0xffff_ffff } else { out };
                }
                JMP => {
                    let taken = match i.code & 0xf0 {
                        EXIT => return r[0] as u32,
                        JA => true,
                        JEQ => r[d] == imm,
                        JNE => r[d] != imm,
                        JGT => r[d] > imm,
                        JLT => r[d] < imm,
                        op => panic!("jump {op:#x} not interpreted"),
                    };
                    if taken {
                        pc = (pc as i64 + i64::from(i.off)) as usize;
                    }
                }
                c => panic!("class {c} not interpreted"),
            }
        }
        panic!("the program did not end");
    }

    fn ipv4(proto: u8, src: [u8; 4], sport: u16, dport: u16, frag: u16, id: u16) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 40];
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&frag.to_be_bytes());
        p.extend_from_slice(&[64, proto, 0, 0]);
        p.extend_from_slice(&src);
        p.extend_from_slice(&[10, 7, 0, 2]);
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.extend_from_slice(&[0; 16]);
        p
    }

    fn ipv6(next: u8, sport: u16, dport: u16) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, 20, next, 64];
        p.extend_from_slice(&[0xfd, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        p.extend_from_slice(&[0xfd, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.extend_from_slice(&[0; 16]);
        p
    }

    const RANGE: RangeInclusive<u16> = 49152..=65535;

    #[test]
    fn shares_cover_the_range_in_order_without_overlap() {
        for queues in [1, 2, 3, 4, 7, 64, 256] {
            let mut next = *RANGE.start() as usize;
            for q in 0..queues {
                let s = ephemeral_share(&RANGE, q, queues).unwrap();
                assert_eq!(*s.start() as usize, next, "{queues} queues, share {q}");
                next = *s.end() as usize + 1;
            }
            assert_eq!(next, *RANGE.end() as usize + 1);
        }
        assert_eq!(ephemeral_share(&RANGE, 2, 2), None);
        assert_eq!(ephemeral_share(&(10..=11), 0, 3), None);
        assert_eq!(ephemeral_share(&RANGE, 0, 0), None);
    }

    #[test]
    fn a_port_in_a_share_is_steered_to_that_share_s_queue() {
        for queues in [2usize, 3, 4, 16] {
            let prog = program(&RANGE, queues, false);
            for q in 0..queues {
                let s = ephemeral_share(&RANGE, q, queues).unwrap();
                for port in [*s.start(), *s.end(), s.start() / 2 + s.end() / 2] {
                    for (proto, src) in [(6, [10, 7, 0, 1]), (17, [192, 0, 2, 9])] {
                        let p = ipv4(proto, src, 80, port, 0x4000, 1);
                        assert_eq!(run(&prog, &p) as usize % queues, q, "port {port}");
                    }
                    let p6 = ipv6(6, 443, port);
                    assert_eq!(run(&prog, &p6) as usize % queues, q, "IPv6 port {port}");
                }
            }
        }
    }

    #[test]
    fn connections_to_a_listening_port_spread_and_each_stays_put() {
        let prog = program(&RANGE, 2, false);
        let mut per_queue = [0usize; 2];
        // Linux's connect() prefers even ports: the hash must not follow the port's parity.
        for sport in (32768u16..33768).step_by(2) {
            let p = ipv4(6, [10, 7, 0, 1], sport, 9, 0x4000, sport);
            let q = run(&prog, &p) as usize % 2;
            // The same flow, a different identification and flags: the same queue.
            assert_eq!(
                run(&prog, &ipv4(6, [10, 7, 0, 1], sport, 9, 0, 7)) as usize % 2,
                q
            );
            per_queue[q] += 1;
        }
        assert!(per_queue.iter().all(|&n| n > 200), "{per_queue:?}");
    }

    #[test]
    fn fragments_follow_the_identification_and_the_rest_goes_to_queue_0() {
        let prog = program(&RANGE, 4, false);
        // First fragment (MF), middle and last (offsets): one identification, one queue.
        for frag in [0x2000u16, 0x2010, 0x0020] {
            assert_eq!(
                run(&prog, &ipv4(17, [10, 7, 0, 1], 5, 6, frag, 0x1235)),
                0x1235
            );
        }
        assert_eq!(run(&prog, &ipv4(1, [10, 7, 0, 1], 5, 6, 0, 9)), 0, "ICMP");
        assert_eq!(run(&prog, &ipv6(44, 5, 6)), 0, "an IPv6 fragment header");
        assert_eq!(run(&prog, &[0x45, 0, 0]), 0, "a truncated packet");
        assert_eq!(run(&prog, &[0x20; 40]), 0, "version 2");
    }

    /// `packet` in an untagged Ethernet frame of `ethertype`.
    fn framed(ethertype: u16, packet: &[u8]) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(packet);
        f
    }

    #[test]
    fn a_tap_interface_s_frames_are_steered_as_their_packets_and_the_rest_goes_to_queue_0() {
        let (tun, tap) = (program(&RANGE, 4, false), program(&RANGE, 4, true));
        let mut packets = vec![
            ipv4(17, [10, 7, 0, 1], 5, 6, 0x2000, 0x1235),
            ipv4(1, [10, 7, 0, 1], 5, 6, 0, 9),
        ];
        for port in (1000u16..65535).step_by(997) {
            packets.push(ipv4(6, [10, 7, 0, 1], port, 7, 0x4000, 1));
            packets.push(ipv4(17, [192, 0, 2, 9], 53, port, 0, 1));
            packets.push(ipv6(6, port, 443));
            packets.push(ipv6(17, 443, port));
        }
        let mut queues = [0usize; 4];
        for p in &packets {
            let ethertype = if p[0] >> 4 == 4 { 0x0800 } else { 0x86dd };
            let q = run(&tap, &framed(ethertype, p));
            assert_eq!(q, run(&tun, p), "{p:?}");
            queues[q as usize % 4] += 1;
        }
        assert!(queues.iter().all(|&n| n > 0), "{queues:?}");
        // ARP, a tagged frame, and a frame whose type says IPv4 but whose packet is cut short.
        let arp = framed(0x0806, &[0, 1, 8, 0, 6, 4, 0, 1]);
        let tagged = framed(0x8100, &ipv4(6, [10, 7, 0, 1], 5, 7, 0, 1));
        let short = framed(0x0800, &[0x45, 0, 0]);
        for f in [arp, tagged, short] {
            assert_eq!(run(&tap, &f), 0, "{f:?}");
        }
    }

    #[test]
    fn instructions_encode_as_the_kernel_reads_them() {
        let insn = Insn {
            code: LD | IND | H,
            dst: 0,
            src: R7,
            off: -2,
            imm: 0x0102_0304,
        };
        assert_eq!(insn.encode(), [0x48, 0x70, 0xfe, 0xff, 4, 3, 2, 1]);
        // Every jump lands inside the program.
        for ethernet in [false, true] {
            let prog = program(&RANGE, 2, ethernet);
            for (i, insn) in prog.iter().enumerate() {
                if insn.code & 0x07 == JMP && insn.code & 0xf0 != EXIT {
                    let to = i as i64 + 1 + i64::from(insn.off);
                    assert!((0..prog.len() as i64).contains(&to), "jump at {i}");
                }
            }
        }
    }
}
