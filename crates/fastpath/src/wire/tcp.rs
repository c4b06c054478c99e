//! The TCP header (RFC 9293 §3.1) and the options fastpath speaks: MSS (RFC 9293 §3.2), window scale
//! and timestamps (RFC 7323), SACK-permitted and SACK blocks (RFC 2018).
//!
//! [`TcpPacket`] is a view over a segment (the IP payload) whose constructor checks the data offset;
//! [`TcpRepr`] is the header's meaning with its options. As for UDP, the checksum belongs to the TCP
//! layer: `parse` does not verify it and `emit` writes zero.

use super::{read_u16, Result, WireError};

/// Length of the header without options, in bytes.
pub const HEADER_LEN: usize = 20;

/// Most option bytes a header can carry (data offset 15 words).
pub const MAX_OPTIONS_LEN: usize = 40;

/// Most SACK blocks one segment carries (4 fit in 40 option bytes; 3 when timestamps are present).
pub const MAX_SACK_BLOCKS: usize = 4;

/// Where each field of the header lives.
mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ: usize = 4;
    pub const ACK: usize = 8;
    /// Data offset (4 bits, in 32-bit words) then 4 reserved bits.
    pub const OFFSET: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
}

/// The alternate checksum number fastpath asks for to mean "no data checksum" (Kay & Pasquale,
/// paper 001: "it is straightforward to define an alternate checksum value specifying no data
/// checksum"). RFC 1146 defines 0 to 2; this experimental value is the next.
pub const ALT_CHECKSUM_NONE: u8 = 3;

/// Offset of the checksum field in the header, for checksum offload.
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM;

/// The control bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags(pub u8);

impl Flags {
    /// No more data from sender.
    pub const FIN: Flags = Flags(0x01);
    /// Synchronize sequence numbers.
    pub const SYN: Flags = Flags(0x02);
    /// Reset the connection.
    pub const RST: Flags = Flags(0x04);
    /// Push.
    pub const PSH: Flags = Flags(0x08);
    /// The acknowledgment field is significant.
    pub const ACK: Flags = Flags(0x10);
    /// The urgent pointer is significant.
    pub const URG: Flags = Flags(0x20);
    /// ECN-Echo (RFC 3168 §6.1): in a SYN, ECN is asked for; after, a congestion mark arrived.
    pub const ECE: Flags = Flags(0x40);
    /// Congestion Window Reduced (RFC 3168 §6.1): in a SYN, ECN is asked for; after, the sender
    /// answered an echo.
    pub const CWR: Flags = Flags(0x80);

    /// True when every bit of `other` is set.
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

/// Option kinds.
mod kind {
    pub const END: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WINDOW_SCALE: u8 = 3;
    pub const SACK_PERMITTED: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TIMESTAMPS: u8 = 8;
    /// RFC 1146 alternate checksum request (historic), carried in SYNs.
    pub const ALT_CHECKSUM_REQUEST: u8 = 14;
    /// TCP Fast Open cookie (RFC 7413 §4.1.1).
    pub const FAST_OPEN: u8 = 34;
    /// The shared experimental kind (RFC 6994), which Fast Open used before kind 34 was assigned,
    /// followed by the 16-bit magic [`FAST_OPEN_MAGIC`].
    pub const EXPERIMENTAL: u8 = 254;
    pub const FAST_OPEN_MAGIC: [u8; 2] = [0xf9, 0x89];
}

/// A TCP Fast Open option (RFC 7413 §4.1.1): a cookie of 4 to 16 bytes, or none (a request for one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FastOpenOption {
    cookie: [u8; 16],
    len: u8,
    /// Carried in the experimental kind 254 with magic 0xF989 (RFC 6994) rather than kind 34, as
    /// clients written before kind 34 was assigned send it; an answer uses the kind it was asked in.
    pub experimental: bool,
}

impl FastOpenOption {
    /// An option carrying `cookie` (at most 16 bytes are kept; empty: a request).
    pub fn new(cookie: &[u8], experimental: bool) -> FastOpenOption {
        let len = cookie.len().min(16);
        let mut bytes = [0u8; 16];
        bytes[..len].copy_from_slice(&cookie[..len]);
        FastOpenOption {
            cookie: bytes,
            len: len as u8,
            experimental,
        }
    }

    /// The cookie (empty in a request).
    pub fn cookie(&self) -> &[u8] {
        &self.cookie[..self.len as usize]
    }

    /// Bytes on the wire, padded to a multiple of 4 with NOPs.
    fn wire_len(&self) -> usize {
        let base = if self.experimental { 4 } else { 2 };
        (base + self.len as usize + 3) & !3
    }
}

/// The options of one segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpOptions {
    /// Maximum segment size the sender can receive (SYN only).
    pub mss: Option<u16>,
    /// The sender's window scale shift (SYN only; values above 14 are read as 14, RFC 7323 §2.3).
    pub window_scale: Option<u8>,
    /// The sender accepts SACK blocks (SYN only).
    pub sack_permitted: bool,
    /// Timestamp value and echo reply.
    pub timestamps: Option<(u32, u32)>,
    /// SACK blocks: `sack_count` valid `(left, right)` edges.
    pub sack: [(u32, u32); MAX_SACK_BLOCKS],
    /// Number of valid entries in `sack`.
    pub sack_count: u8,
    /// RFC 1146 alternate checksum requested, with its algorithm number (0 = TCP checksum, 1 = 8-bit
    /// Fletcher, 2 = 16-bit Fletcher); fastpath only ever asks for 0 with "none" semantics, see
    /// [`crate::tcp`].
    pub alt_checksum: Option<u8>,
    /// TCP Fast Open (RFC 7413): a cookie, or a request for one.
    pub fast_open: Option<FastOpenOption>,
}

impl TcpOptions {
    /// The SACK blocks present.
    pub fn sack_blocks(&self) -> &[(u32, u32)] {
        &self.sack[..self.sack_count as usize]
    }

    /// Bytes these options take on the wire, padded to a multiple of 4.
    pub fn wire_len(&self) -> usize {
        let mut n = 0;
        if self.mss.is_some() {
            n += 4;
        }
        if self.window_scale.is_some() {
            n += 4; // NOP + 3
        }
        if self.timestamps.is_some() {
            n += 12; // NOP NOP + 10 (or SACK-permitted + 10)
        } else if self.sack_permitted {
            n += 4; // NOP NOP + 2
        }
        if self.sack_count > 0 {
            n += 4 + 8 * self.sack_count as usize; // NOP NOP + 2 + 8n
        }
        if self.alt_checksum.is_some() {
            n += 4; // NOP + 3
        }
        if let Some(fo) = &self.fast_open {
            n += fo.wire_len();
        }
        n
    }

    /// Parses the option bytes of a header, as Linux's `tcp_parse_options` does: unknown options are
    /// skipped by their length, a known option of the wrong length is ignored, and a length below 2
    /// or past the end stops the parse (what came before is kept). A malformed option thus never
    /// costs the segment: a SYN whose MSS option is 3 bytes long is answered as one without it (RFC
    /// 9293 §3.1 asks a receiver to be prepared for any option; Linux answers such SYNs).
    #[inline]
    pub fn parse(bytes: &[u8]) -> Result<TcpOptions> {
        // The options of almost every segment once a connection is up: timestamps alone, after two
        // NOPs (RFC 7323 appendix A), read at once as Van Jacobson's header prediction does.
        if let [kind::NOP, kind::NOP, kind::TIMESTAMPS, 10, v0, v1, v2, v3, e0, e1, e2, e3] = *bytes
        {
            return Ok(TcpOptions {
                timestamps: Some((
                    u32::from_be_bytes([v0, v1, v2, v3]),
                    u32::from_be_bytes([e0, e1, e2, e3]),
                )),
                ..TcpOptions::default()
            });
        }
        Self::parse_any(bytes)
    }

    /// [`TcpOptions::parse`] for any options.
    #[inline(never)]
    fn parse_any(mut bytes: &[u8]) -> Result<TcpOptions> {
        let mut opts = TcpOptions::default();
        while let Some(&k) = bytes.first() {
            match k {
                kind::END => break,
                kind::NOP => {
                    bytes = &bytes[1..];
                    continue;
                }
                _ => {}
            }
            let Some(&len) = bytes.get(1) else {
                break;
            };
            let len = len as usize;
            if len < 2 || len > bytes.len() {
                break;
            }
            let body = &bytes[2..len];
            match (k, body.len()) {
                (kind::MSS, 2) => opts.mss = Some(u16::from_be_bytes([body[0], body[1]])),
                (kind::WINDOW_SCALE, 1) => opts.window_scale = Some(body[0].min(14)),
                (kind::SACK_PERMITTED, 0) => opts.sack_permitted = true,
                (kind::TIMESTAMPS, 8) => {
                    opts.timestamps = Some((
                        u32::from_be_bytes([body[0], body[1], body[2], body[3]]),
                        u32::from_be_bytes([body[4], body[5], body[6], body[7]]),
                    ))
                }
                (kind::SACK, n) if n % 8 == 0 && n > 0 => {
                    for block in body.chunks_exact(8).take(MAX_SACK_BLOCKS) {
                        let left = u32::from_be_bytes([block[0], block[1], block[2], block[3]]);
                        let right = u32::from_be_bytes([block[4], block[5], block[6], block[7]]);
                        opts.sack[opts.sack_count as usize] = (left, right);
                        opts.sack_count += 1;
                    }
                }
                (kind::ALT_CHECKSUM_REQUEST, 1) => opts.alt_checksum = Some(body[0]),
                (kind::FAST_OPEN, n) => opts.fast_open = Some(fast_open(body, n, false)),
                (kind::EXPERIMENTAL, n) if n >= 2 && body[..2] == kind::FAST_OPEN_MAGIC => {
                    opts.fast_open = Some(fast_open(&body[2..], n - 2, true))
                }
                _ => {} // unknown, or a known one of the wrong length: skipped
            }
            bytes = &bytes[len..];
        }
        Ok(opts)
    }

    /// Whether timestamps are the only option (or none is).
    #[inline]
    fn only_timestamps(&self) -> bool {
        self.mss.is_none()
            && self.window_scale.is_none()
            && !self.sack_permitted
            && self.sack_count == 0
            && self.alt_checksum.is_none()
            && self.fast_open.is_none()
    }

    /// Writes the options into `out`, which must be exactly [`TcpOptions::wire_len`] bytes. Layouts
    /// follow RFC 7323 appendix A (NOPs so that 32-bit fields stay aligned).
    #[inline]
    pub fn emit(&self, out: &mut [u8]) {
        // An established connection's usual option, timestamps alone, in one store.
        if let Some((val, ecr)) = self.timestamps.filter(|_| out.len() == 12) {
            if self.only_timestamps() {
                let (v, r) = (val.to_be_bytes(), ecr.to_be_bytes());
                out.copy_from_slice(&[
                    kind::NOP,
                    kind::NOP,
                    kind::TIMESTAMPS,
                    10,
                    v[0],
                    v[1],
                    v[2],
                    v[3],
                    r[0],
                    r[1],
                    r[2],
                    r[3],
                ]);
                return;
            }
        }
        self.emit_any(out);
    }

    /// [`TcpOptions::emit`] for any options.
    #[inline(never)]
    fn emit_any(&self, out: &mut [u8]) {
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            out[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        if let Some(mss) = self.mss {
            let m = mss.to_be_bytes();
            put(&[kind::MSS, 4, m[0], m[1]]);
        }
        if self.sack_permitted && self.timestamps.is_some() {
            put(&[kind::SACK_PERMITTED, 2]);
        } else if self.sack_permitted {
            put(&[kind::NOP, kind::NOP, kind::SACK_PERMITTED, 2]);
        }
        if let Some((val, ecr)) = self.timestamps {
            if !self.sack_permitted {
                put(&[kind::NOP, kind::NOP]);
            }
            put(&[kind::TIMESTAMPS, 10]);
            put(&val.to_be_bytes());
            put(&ecr.to_be_bytes());
        }
        if let Some(shift) = self.window_scale {
            put(&[kind::NOP, kind::WINDOW_SCALE, 3, shift]);
        }
        if self.sack_count > 0 {
            put(&[kind::NOP, kind::NOP, kind::SACK, 2 + 8 * self.sack_count]);
            for &(l, r) in self.sack_blocks() {
                put(&l.to_be_bytes());
                put(&r.to_be_bytes());
            }
        }
        if let Some(alg) = self.alt_checksum {
            put(&[kind::NOP, kind::ALT_CHECKSUM_REQUEST, 3, alg]);
        }
        if let Some(fo) = &self.fast_open {
            let cookie = fo.cookie();
            let len = cookie.len() as u8;
            if fo.experimental {
                put(&[kind::EXPERIMENTAL, 4 + len]);
                put(&kind::FAST_OPEN_MAGIC);
            } else {
                put(&[kind::FAST_OPEN, 2 + len]);
            }
            put(cookie);
            // Padded with NOPs at the end, as Linux lays it out.
            let pad = fo.wire_len() - cookie.len() - if fo.experimental { 4 } else { 2 };
            put(&[kind::NOP; 3][..pad]);
        }
    }
}

/// A Fast Open option's cookie of `n` bytes: 4 to 16, and even (RFC 7413 §4.1.1). Any other length
/// is read as no cookie, as Linux's parser does not take it either: the server answers with a cookie.
fn fast_open(cookie: &[u8], n: usize, experimental: bool) -> FastOpenOption {
    if (4..=16).contains(&n) && n.is_multiple_of(2) {
        FastOpenOption::new(cookie, experimental)
    } else {
        FastOpenOption::new(&[], experimental)
    }
}

/// A typed view of a TCP segment over a byte buffer (the IP payload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wraps a buffer after checking it: [`WireError::Truncated`] if shorter than 20 bytes,
    /// [`WireError::BadHeaderLength`] if the data offset is below 5 words or past the buffer.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let data = buffer.as_ref();
        if data.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let header_len = ((data[field::OFFSET] >> 4) as usize) * 4;
        if header_len < HEADER_LEN || header_len > data.len() {
            return Err(WireError::BadHeaderLength);
        }
        Ok(TcpPacket { buffer })
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Sequence number.
    pub fn seq(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::SEQ)
    }

    /// Acknowledgment number.
    pub fn ack(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::ACK)
    }

    /// Header length in bytes, options included.
    pub fn header_len(&self) -> usize {
        ((self.buffer.as_ref()[field::OFFSET] >> 4) as usize) * 4
    }

    /// Control bits.
    pub fn flags(&self) -> Flags {
        Flags(self.buffer.as_ref()[field::FLAGS])
    }

    /// Window field (unscaled).
    pub fn window(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::WINDOW)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Urgent pointer.
    pub fn urgent(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::URGENT)
    }

    /// The option bytes.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// The payload.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

fn read_u32(data: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]])
}

/// What a TCP header means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number (meaningful with ACK).
    pub ack: u32,
    /// Control bits.
    pub flags: Flags,
    /// Window field, before scaling.
    pub window: u16,
    /// Urgent pointer.
    pub urgent: u16,
    /// Options.
    pub options: TcpOptions,
}

impl TcpRepr {
    /// Parses a checked packet's header and options.
    pub fn parse<T: AsRef<[u8]>>(packet: &TcpPacket<T>) -> Result<TcpRepr> {
        // The fixed header read as one array (no bounds check a field).
        let Some(h) = packet.buffer.as_ref().first_chunk::<HEADER_LEN>() else {
            return Err(WireError::Truncated);
        };
        let options = if packet.header_len() > HEADER_LEN {
            TcpOptions::parse(packet.options())?
        } else {
            TcpOptions::default()
        };
        Ok(TcpRepr {
            src_port: u16::from_be_bytes([h[0], h[1]]),
            dst_port: u16::from_be_bytes([h[2], h[3]]),
            seq: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
            ack: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
            flags: Flags(h[field::FLAGS]),
            window: u16::from_be_bytes([h[14], h[15]]),
            urgent: u16::from_be_bytes([h[18], h[19]]),
            options,
        })
    }

    /// Header length with options, in bytes.
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options.wire_len()
    }

    /// Writes the header (checksum zero) into `header`, which must be exactly
    /// [`TcpRepr::header_len`] bytes.
    pub fn emit(&self, header: &mut [u8]) {
        let (fixed, options) = header.split_at_mut(HEADER_LEN);
        let (sp, dp, seq, ack) = (
            self.src_port.to_be_bytes(),
            self.dst_port.to_be_bytes(),
            self.seq.to_be_bytes(),
            self.ack.to_be_bytes(),
        );
        let (window, urgent) = (self.window.to_be_bytes(), self.urgent.to_be_bytes());
        let offset = (((HEADER_LEN + options.len()) / 4) as u8) << 4;
        // Built whole and stored at once (the field offsets are RFC 9293's).
        fixed.copy_from_slice(&[
            sp[0],
            sp[1],
            dp[0],
            dp[1],
            seq[0],
            seq[1],
            seq[2],
            seq[3],
            ack[0],
            ack[1],
            ack[2],
            ack[3],
            offset,
            self.flags.0,
            window[0],
            window[1],
            0,
            0,
            urgent[0],
            urgent[1],
        ]);
        self.options.emit(options);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SYN as Linux 6.x sends it: MSS 1460, SACK permitted, timestamps, window scale 7.
    const LINUX_SYN: [u8; 40] = [
        0xa4, 0x1c, 0x00, 0x07, // ports 42012 -> 7
        0x6b, 0x8b, 0x45, 0x67, // seq
        0x00, 0x00, 0x00, 0x00, // ack
        0xa0, 0x02, 0xfa, 0xf0, // offset 10 words, SYN, window 64240
        0x00, 0x00, 0x00, 0x00, // checksum, urgent
        0x02, 0x04, 0x05, 0xb4, // MSS 1460
        0x04, 0x02, 0x08, 0x0a, // SACK permitted, timestamps...
        0x11, 0x22, 0x33, 0x44, // TSval
        0x00, 0x00, 0x00, 0x00, // TSecr
        0x01, 0x03, 0x03, 0x07, // NOP, window scale 7
    ];

    #[test]
    fn parses_a_linux_syn() {
        let packet = TcpPacket::new_checked(&LINUX_SYN[..]).unwrap();
        let repr = TcpRepr::parse(&packet).unwrap();
        assert_eq!((repr.src_port, repr.dst_port), (42012, 7));
        assert_eq!(repr.seq, 0x6b8b4567);
        assert_eq!(repr.flags, Flags::SYN);
        assert_eq!(repr.window, 64240);
        assert_eq!(repr.options.mss, Some(1460));
        assert!(repr.options.sack_permitted);
        assert_eq!(repr.options.timestamps, Some((0x11223344, 0)));
        assert_eq!(repr.options.window_scale, Some(7));
    }

    /// Fast Open options as Linux writes them: kind 34 with an 8-byte cookie and two NOPs after it,
    /// the experimental kind with its magic, and an empty request; a bad length reads as a request.
    #[test]
    fn fast_open_options_round_trip_in_linux_layout() {
        let cookie = [0x30, 0x21, 0xb9, 0xd8, 0x89, 0x01, 0x7e, 0xeb];
        let cases: [(&[u8], FastOpenOption); 4] = [
            (
                &[34, 10, 0x30, 0x21, 0xb9, 0xd8, 0x89, 0x01, 0x7e, 0xeb, 1, 1],
                FastOpenOption::new(&cookie, false),
            ),
            (
                &[
                    254, 12, 0xf9, 0x89, 0x30, 0x21, 0xb9, 0xd8, 0x89, 0x01, 0x7e, 0xeb,
                ],
                FastOpenOption::new(&cookie, true),
            ),
            (&[34, 2, 1, 1], FastOpenOption::new(&[], false)),
            (&[254, 4, 0xf9, 0x89], FastOpenOption::new(&[], true)),
        ];
        for (bytes, fo) in cases {
            let parsed = TcpOptions::parse(bytes).unwrap();
            assert_eq!(parsed.fast_open, Some(fo));
            assert_eq!(parsed.wire_len(), bytes.len());
            let mut out = vec![0u8; bytes.len()];
            parsed.emit(&mut out);
            assert_eq!(out, bytes);
        }
        // A 3-byte cookie, and another experimental option, are not cookies.
        let odd = TcpOptions::parse(&[34, 5, 1, 2, 3, 0, 0, 0]).unwrap();
        assert_eq!(odd.fast_open, Some(FastOpenOption::new(&[], false)));
        let other = TcpOptions::parse(&[254, 4, 0x12, 0x34]).unwrap();
        assert_eq!(other.fast_open, None);
    }

    #[test]
    fn emits_the_same_bytes() {
        let repr = TcpRepr::parse(&TcpPacket::new_checked(&LINUX_SYN[..]).unwrap()).unwrap();
        assert_eq!(repr.header_len(), 40);
        let mut out = [0xffu8; 40];
        repr.emit(&mut out);
        assert_eq!(out, LINUX_SYN);
    }

    #[test]
    fn round_trips_sack_blocks_and_every_option_mix() {
        for mask in 0..32u8 {
            let mut o = TcpOptions {
                mss: (mask & 1 != 0).then_some(8960),
                window_scale: (mask & 2 != 0).then_some(9),
                sack_permitted: mask & 4 != 0,
                timestamps: (mask & 8 != 0).then_some((7, 9)),
                ..TcpOptions::default()
            };
            if mask & 16 != 0 {
                // As many blocks as the 40 option bytes leave room for.
                o.sack_count = ((MAX_OPTIONS_LEN - o.wire_len() - 4) / 8).min(4) as u8;
                for i in 0..o.sack_count as usize {
                    o.sack[i] = (i as u32 * 100, i as u32 * 100 + 50);
                }
            }
            let repr = TcpRepr {
                src_port: 1,
                dst_port: 2,
                seq: 3,
                ack: 4,
                flags: Flags::ACK | Flags::PSH,
                window: 5,
                urgent: 0,
                options: o,
            };
            assert!(repr.header_len() <= HEADER_LEN + MAX_OPTIONS_LEN, "{mask}");
            let mut bytes = vec![0u8; repr.header_len()];
            repr.emit(&mut bytes);
            let back = TcpRepr::parse(&TcpPacket::new_checked(&bytes[..]).unwrap()).unwrap();
            assert_eq!(back, repr, "mask {mask}");
            let parsed = etherparse::TcpHeaderSlice::from_slice(&bytes).unwrap();
            assert_eq!(parsed.sequence_number(), 3);
        }
    }

    #[test]
    fn rejects_bad_offsets_and_option_lengths() {
        assert_eq!(
            TcpPacket::new_checked(&LINUX_SYN[..19]).unwrap_err(),
            WireError::Truncated
        );
        let mut short = LINUX_SYN;
        short[12] = 0x40; // 4 words
        assert_eq!(
            TcpPacket::new_checked(&short[..]).unwrap_err(),
            WireError::BadHeaderLength
        );
        assert_eq!(
            TcpPacket::new_checked(&LINUX_SYN[..36]).unwrap_err(),
            WireError::BadHeaderLength
        );
        // A malformed length stops the parse, keeping what came before; a known option of the wrong
        // size is skipped (as Linux): never an error, so the segment is not lost for it.
        let mss = [2, 4, 1, 0];
        for bad in [
            &[2u8][..],          // kind without length
            &[2, 1, 0, 0],       // length below 2
            &[2, 0, 0, 0],       // length 0
            &[2, 9, 0, 0],       // past the end
            &[3, 4, 7, 0],       // window scale of the wrong size
            &[4, 4, 0, 0],       // SACK-permitted of the wrong size
            &[5, 6, 0, 0, 0, 0], // SACK not a multiple of 8
            &[8, 6, 0, 0, 0, 0], // timestamps of the wrong size
        ] {
            let after = [&mss[..], bad].concat();
            let o = TcpOptions::parse(&after).unwrap();
            assert_eq!(
                o,
                TcpOptions {
                    mss: Some(256),
                    ..TcpOptions::default()
                },
                "{bad:?}"
            );
        }
        // A wrong-sized MSS is ignored and the options after it still read.
        let o = TcpOptions::parse(&[2, 3, 0, 1, 4, 2]).unwrap();
        assert_eq!((o.mss, o.sack_permitted), (None, true));
        // Unknown options are skipped; END stops.
        let o = TcpOptions::parse(&[30, 4, 0, 0, 2, 4, 1, 0, 0, 99]).unwrap();
        assert_eq!(o.mss, Some(256));
    }
}
