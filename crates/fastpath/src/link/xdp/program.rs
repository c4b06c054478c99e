//! The XDP program: which frames arriving on the interface go to the AF_XDP socket of their queue,
//! and which stay with the kernel.
//!
//! A frame is the stack's when its Ethernet destination is the interface's own address, the
//! broadcast address (ARP requests), or an IPv6 multicast address (`33:33:…`: neighbour
//! solicitations to a solicited-node group, router advertisements). Those are redirected with
//! `bpf_redirect_map(&xskmap, ctx->rx_queue_index, XDP_PASS)`: to the socket bound to the queue the
//! frame came in on, or, if that queue has none, on to the kernel (the helper returns the low bits
//! of its flags argument on a miss). Everything else (frames to other unicast addresses, IPv4
//! multicast, anything shorter than an Ethernet header) returns `XDP_PASS`, and the kernel does what
//! it would have done without the program.
//!
//! Built here instruction by instruction (no compiler), like the TUN link's steering program, and
//! run in the unit tests below on an interpreter of the instructions it uses, the helper call
//! modelled; the integration tests (`tests/xdp.rs`) run it in the kernel.

use crate::link::bpf::*;

/// `BPF_PSEUDO_MAP_FD`: the source register of a 64-bit immediate load that names a map by its
/// descriptor (the kernel replaces it with the map's address).
const PSEUDO_MAP_FD: u8 = 1;
/// The helper `bpf_redirect_map`.
const REDIRECT_MAP: i32 = 51;

/// `XDP_PASS`: on to the kernel's stack.
pub(super) const XDP_PASS: u32 = 2;
/// `XDP_REDIRECT`: what `bpf_redirect_map` returns when the queue has a socket.
#[cfg(test)]
const XDP_REDIRECT: u32 = 4;

/// Offsets in `struct xdp_md`.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE_INDEX: i16 = 16;

/// Bytes of an Ethernet header: a shorter frame is the kernel's.
const ETHERNET_HEADER: i32 = 14;

/// The program for an interface whose address is `mac`, redirecting through the XSKMAP `map_fd`
/// (see the [module documentation](self)).
pub(super) fn program(mac: [u8; 6], map_fd: i32) -> Vec<Insn> {
    // The address as the two loads below see it: bytes 0-3 and 4-5 in host order.
    let mac_lo = u32::from_ne_bytes([mac[0], mac[1], mac[2], mac[3]]) as i32;
    let mac_hi = i32::from(u16::from_ne_bytes([mac[4], mac[5]]));
    let v6_multicast = i32::from(u16::from_ne_bytes([0x33, 0x33]));
    let mut a = Asm::default();
    let (not_ours, not_broadcast, redirect, pass) = (a.label(), a.label(), a.label(), a.label());
    a.insn(ALU64 | MOV | X, R6, R1, 0, 0);
    a.load(W, R2, R1, MD_DATA);
    a.load(W, R3, R1, MD_DATA_END);
    a.insn(ALU64 | MOV | X, R4, R2, 0, 0);
    a.insn(ALU64 | ADD | K, R4, 0, 0, ETHERNET_HEADER);
    a.jump_reg(JGT, R4, R3, pass);
    // r4 = destination bytes 0-3, r5 = bytes 4-5.
    a.load(W, R4, R2, 0);
    a.load(H, R5, R2, 4);
    // Our own address.
    a.jump_imm(JMP32, JNE, R4, mac_lo, not_ours);
    a.jump_imm(JMP32, JEQ, R5, mac_hi, redirect);
    a.place(not_ours);
    // Broadcast.
    a.jump_imm(JMP32, JNE, R4, -1, not_broadcast);
    a.jump_imm(JMP32, JEQ, R5, 0xffff, redirect);
    a.place(not_broadcast);
    // IPv6 multicast: 33:33 in the first two bytes.
    a.load(H, R4, R2, 0);
    a.jump_imm(JMP32, JNE, R4, v6_multicast, pass);

    a.place(redirect);
    a.load(W, R2, R6, MD_RX_QUEUE_INDEX);
    // r1 = the map (a 64-bit immediate load: two instructions).
    a.insn(LD | IMM | DW, R1, PSEUDO_MAP_FD, 0, map_fd);
    a.insn(0, 0, 0, 0, 0);
    a.insn(ALU64 | MOV | K, R3, 0, 0, XDP_PASS as i32);
    a.insn(JMP | CALL, 0, 0, 0, REDIRECT_MAP);
    a.insn(JMP | EXIT, 0, 0, 0, 0);

    a.place(pass);
    a.exit_with(XDP_PASS as i32);
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the interpreter puts the context and the packet in its address space.
    const CTX: u64 = 1 << 40;
    const PKT: u64 = 2 << 40;
    /// What the 64-bit immediate load of the map becomes.
    const MAP: u64 = 3 << 40;

    const MAP_FD: i32 = 7;

    /// What the program did with a frame: passed it, or redirected it to the socket of `queue`.
    #[derive(Debug, PartialEq, Eq)]
    enum Verdict {
        Pass,
        Redirect(u32),
        Other(u32),
    }

    /// Runs `prog` on `frame`, received on queue `queue`, with sockets in the XSKMAP at `sockets`,
    /// as the kernel would for the instructions [`program`] uses. A load outside the context or the
    /// packet panics: the verifier would have refused the program.
    fn run(prog: &[Insn], frame: &[u8], queue: u32, sockets: &[u32]) -> Verdict {
        let mut r = [0u64; 11];
        r[1] = CTX;
        let mut pc = 0usize;
        let mut redirected = None;
        let load = |addr: u64, size: u8| -> u64 {
            let n = match size {
                W => 4,
                H => 2,
                _ => panic!("size {size:#x} not interpreted"),
            };
            if (CTX..CTX + 24).contains(&addr) {
                assert_eq!(n, 4, "context fields are read as words");
                return match (addr - CTX) as i16 {
                    MD_DATA => PKT,
                    MD_DATA_END => PKT + frame.len() as u64,
                    MD_RX_QUEUE_INDEX => u64::from(queue),
                    off => panic!("context offset {off} not modelled"),
                };
            }
            let at = addr
                .checked_sub(PKT)
                .and_then(|a| usize::try_from(a).ok())
                .expect("a load from neither the context nor the packet");
            let bytes = frame
                .get(at..at + n)
                .expect("a packet load past data_end: the verifier would refuse it");
            let mut v = [0u8; 8];
            v[..n].copy_from_slice(bytes);
            u64::from_ne_bytes(v) & (u64::MAX >> (64 - 8 * n))
        };
        for _ in 0..1000 {
            let i = prog[pc];
            pc += 1;
            let (class, d, s) = (i.code & 0x07, usize::from(i.dst), usize::from(i.src));
            let imm = i.imm as i64 as u64;
            match class {
                LD => {
                    assert_eq!(i.code, LD | IMM | DW);
                    assert_eq!(i.src, PSEUDO_MAP_FD);
                    assert_eq!(i.imm, MAP_FD);
                    r[d] = MAP;
                    pc += 1;
                }
                LDX => {
                    let addr = r[s].wrapping_add(i.off as i64 as u64);
                    r[d] = load(addr, i.code & 0x18);
                }
                ALU64 => {
                    let v = if i.code & X != 0 { r[s] } else { imm };
                    r[d] = match i.code & 0xf0 {
                        MOV => v,
                        ADD => r[d].wrapping_add(v),
                        op => panic!("op {op:#x} not interpreted"),
                    };
                }
                JMP | JMP32 => {
                    let op = i.code & 0xf0;
                    if op == EXIT {
                        return match (r[0] as u32, redirected) {
                            (XDP_PASS, None) => Verdict::Pass,
                            (XDP_REDIRECT, Some(q)) => Verdict::Redirect(q),
                            (v, _) => Verdict::Other(v),
                        };
                    }
                    if op == CALL {
                        assert_eq!(i.imm, REDIRECT_MAP, "only bpf_redirect_map is modelled");
                        assert_eq!(r[1], MAP, "the map is the first argument");
                        let key = r[2] as u32;
                        r[0] = if sockets.contains(&key) {
                            redirected = Some(key);
                            u64::from(XDP_REDIRECT)
                        } else {
                            // A miss returns the low bits of the flags.
                            r[3] & 3
                        };
                        // The helper call clobbers r1-r5.
                        r[1..=5].fill(0xdead_beef);
                        continue;
                    }
                    let v = if i.code & X != 0 { r[s] } else { imm };
                    let (a, b) = if class == JMP32 {
                        (r[d] & 0xffff_ffff, v & 0xffff_ffff)
                    } else {
                        (r[d], v)
                    };
                    let taken = match op {
                        JEQ => a == b,
                        JNE => a != b,
                        JGT => a > b,
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

    /// Addresses with the top bit set in each half of the loads, so a comparison that sign-extended
    /// its constant would fail.
    const OURS: [u8; 6] = [0x02, 0x11, 0x22, 0xf3, 0x44, 0x95];

    fn frame(dst: [u8; 6], len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[..6].copy_from_slice(&dst[..]);
        if len >= 14 {
            f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
            f[12..14].copy_from_slice(&[0x08, 0x00]);
        }
        f
    }

    #[test]
    fn the_stack_s_frames_go_to_the_queue_s_socket() {
        let prog = program(OURS, MAP_FD);
        for dst in [
            OURS,
            [0xff; 6],
            [0x33, 0x33, 0, 0, 0, 1],
            [0x33, 0x33, 0xff, 1, 2, 3],
        ] {
            for queue in [0, 3] {
                assert_eq!(
                    run(&prog, &frame(dst, 60), queue, &[0, 3]),
                    Verdict::Redirect(queue),
                    "{dst:x?} on queue {queue}"
                );
            }
        }
        // The shortest frame the program takes: a bare header.
        assert_eq!(run(&prog, &frame(OURS, 14), 0, &[0]), Verdict::Redirect(0));
    }

    #[test]
    fn everything_else_passes_to_the_kernel() {
        let prog = program(OURS, MAP_FD);
        let mut near = OURS;
        near[5] ^= 1;
        let mut near_lo = OURS;
        near_lo[0] ^= 0x80;
        for dst in [
            near,
            near_lo,
            [0x02, 0, 0, 0, 0, 0x99],
            [0x01, 0x00, 0x5e, 0x01, 0x02, 0x03],
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xfe],
            [0x33, 0x34, 0, 0, 0, 1],
            [0x00; 6],
        ] {
            assert_eq!(
                run(&prog, &frame(dst, 60), 0, &[0]),
                Verdict::Pass,
                "{dst:x?}"
            );
        }
        // Shorter than an Ethernet header, even if addressed to us.
        assert_eq!(run(&prog, &frame(OURS, 13), 0, &[0]), Verdict::Pass);
        assert_eq!(run(&prog, &[], 0, &[0]), Verdict::Pass);
        // Ours, but on a queue with no socket: the kernel keeps it.
        assert_eq!(run(&prog, &frame(OURS, 60), 1, &[0]), Verdict::Pass);
    }

    #[test]
    fn instructions_encode_as_the_kernel_reads_them() {
        let insn = Insn {
            code: LDX | MEM | H,
            dst: R5,
            src: R2,
            off: -2,
            imm: 0x0102_0304,
        };
        assert_eq!(insn.encode(), [0x69, 0x25, 0xfe, 0xff, 4, 3, 2, 1]);
        // Every jump lands inside the program, and never in the middle of the 64-bit load.
        let prog = program(OURS, MAP_FD);
        let wide = prog
            .iter()
            .position(|i| i.code == LD | IMM | DW)
            .expect("the map load");
        for (i, insn) in prog.iter().enumerate() {
            let class = insn.code & 0x07;
            let op = insn.code & 0xf0;
            if (class == JMP || class == JMP32) && op != EXIT && op != CALL {
                let to = i as i64 + 1 + i64::from(insn.off);
                assert!((0..prog.len() as i64).contains(&to), "jump at {i}");
                assert_ne!(to, wide as i64 + 1, "jump at {i} into the 64-bit load");
            }
        }
    }
}
