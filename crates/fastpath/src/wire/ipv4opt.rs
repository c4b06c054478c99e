//! IPv4 options (RFC 791 §3.1): the checks a host makes of the options of a datagram it receives,
//! and the options an echo reply carries back (RFC 1122 §3.2.2.6, §3.2.1.8).
//!
//! [`check`] makes the checks Linux's `ip_options_compile` makes of a received header, and names the
//! byte at fault for an ICMP parameter problem (RFC 792, type 12 code 0): an option whose length
//! cannot be (below 2, or past the options area), a record route or source route option shorter than
//! 3 bytes or whose pointer is below 4, a timestamp option shorter than 4 bytes or whose pointer is
//! below 5, a pointer that leaves room for part of an entry only, a second source route, a timestamp
//! whose overflow count would overflow (RFC 791). Options this host does not know are skipped.
//!
//! [`echo`] builds the options of the reply to an echo request as Linux does (`ip_options_echo`):
//! record route and timestamp options are copied (in that order, padded to a 32-bit boundary), with
//! this host's address and time entered where there is room, once as the request arrives and once as
//! the reply leaves (RFC 791: each host a datagram passes through enters itself). Other options are
//! not echoed.

use std::net::Ipv4Addr;

/// End of option list (RFC 791).
pub const END: u8 = 0;
/// No operation.
pub const NOOP: u8 = 1;
/// Record route.
pub const RECORD_ROUTE: u8 = 7;
/// Internet timestamp.
pub const TIMESTAMP: u8 = 68;
/// Loose source and record route.
pub const LOOSE_SOURCE_ROUTE: u8 = 131;
/// Strict source and record route.
pub const STRICT_SOURCE_ROUTE: u8 = 137;
/// Router alert (RFC 2113).
pub const ROUTER_ALERT: u8 = 148;

/// The most option bytes a header holds (IHL 15).
pub const MAX_LEN: usize = 40;

/// Timestamp flags (RFC 791): timestamps only, each with the address of who entered it, or
/// timestamps of hosts named in advance.
const TS_ONLY: u8 = 0;
const TS_AND_ADDRESS: u8 = 1;
const TS_PRESPECIFIED: u8 = 3;

/// What [`check`] found in a valid options area that an echo reply carries back: where the record
/// route and timestamp options start (offsets into the area; the last of each kind, as Linux keeps).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// The record route option's offset.
    pub record_route: Option<usize>,
    /// The timestamp option's offset.
    pub timestamp: Option<usize>,
}

/// An options area to send: up to [`MAX_LEN`] bytes, a multiple of 4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    bytes: [u8; MAX_LEN],
    len: u8,
}

impl Options {
    /// No options.
    pub const NONE: Options = Options {
        bytes: [0; MAX_LEN],
        len: 0,
    };

    /// An area holding `bytes`, if they fit.
    pub fn from_slice(bytes: &[u8]) -> Option<Options> {
        let mut o = Options::NONE;
        o.bytes.get_mut(..bytes.len())?.copy_from_slice(bytes);
        o.len = bytes.len() as u8;
        Some(o)
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Checks the options area `options` (a header's bytes after its first 20). `Err` holds the offset,
/// from the start of the header, of the byte at fault: the parameter problem's pointer.
pub fn check(options: &[u8]) -> Result<Found, u8> {
    let at = |i: usize| (20 + i).min(255) as u8;
    let mut found = Found::default();
    let mut source_route = false;
    let mut i = 0;
    while i < options.len() {
        let kind = options[i];
        if kind == END {
            break;
        }
        if kind == NOOP {
            i += 1;
            continue;
        }
        let rest = options.len() - i;
        let len = match options.get(i + 1) {
            Some(&len) if len >= 2 && usize::from(len) <= rest => usize::from(len),
            _ => return Err(at(i)),
        };
        let option = &options[i..i + len];
        match kind {
            RECORD_ROUTE | LOOSE_SOURCE_ROUTE | STRICT_SOURCE_ROUTE => {
                if len < 3 {
                    return Err(at(i + 1));
                }
                let pointer = usize::from(option[2]);
                if pointer < 4 {
                    return Err(at(i + 2));
                }
                if kind == RECORD_ROUTE {
                    if pointer <= len && pointer + 3 > len {
                        return Err(at(i + 2));
                    }
                    found.record_route = Some(i);
                } else {
                    // Two source routes (RFC 1812 §5.2.4.1).
                    if source_route {
                        return Err(at(i));
                    }
                    source_route = true;
                }
            }
            TIMESTAMP => {
                if len < 4 {
                    return Err(at(i + 1));
                }
                let pointer = usize::from(option[2]);
                if pointer < 5 {
                    return Err(at(i + 2));
                }
                if pointer <= len {
                    let entry = match option[3] & 0x0f {
                        TS_AND_ADDRESS | TS_PRESPECIFIED => 8,
                        _ => 4,
                    };
                    if pointer + 3 > len || pointer + entry - 1 > len {
                        return Err(at(i + 2));
                    }
                } else if option[3] >> 4 == 0x0f {
                    // Full, and the overflow count would overflow.
                    return Err(at(i + 3));
                }
                found.timestamp = Some(i);
            }
            ROUTER_ALERT if len < 4 => return Err(at(i + 1)),
            _ => {}
        }
        i += len;
    }
    Ok(found)
}

/// The options of the reply to an echo request whose options area `options` passed [`check`] (which
/// found `found`), from and to `addr` (the address the request was sent to, which the reply comes
/// from), at `time` (milliseconds since midnight UT, RFC 791); `own` tells whether an address is one
/// of this host's (a prespecified timestamp is entered only by the host it names). `None` when an
/// option leaves room for part of an entry only (Linux sends no reply then).
pub fn echo(
    options: &[u8],
    found: Found,
    addr: Ipv4Addr,
    time: u32,
    own: impl Fn(Ipv4Addr) -> bool,
) -> Option<Options> {
    let mut out = Options::NONE;
    let mut n = 0;
    let addr = addr.octets();
    let time = time.to_be_bytes();
    let read_addr = |o: &[u8], at: usize| -> Option<Ipv4Addr> {
        let b: [u8; 4] = o.get(at..at + 4)?.try_into().ok()?;
        Some(Ipv4Addr::from(b))
    };
    let write = |o: &mut [u8], at: usize, what: &[u8; 4]| -> Option<()> {
        o.get_mut(at..at + 4)?.copy_from_slice(what);
        Some(())
    };
    if let Some(start) = found.record_route {
        let len = usize::from(*options.get(start + 1)?);
        let o = out.bytes.get_mut(n..n + len)?;
        o.copy_from_slice(options.get(start..start + len)?);
        let mut pointer = usize::from(*o.get(2)?);
        if pointer < 4 {
            return None;
        }
        if pointer <= len {
            // As the request arrived.
            write(o, pointer - 1, &addr)?;
            pointer += 4;
            // As the reply leaves.
            if pointer <= len {
                if pointer + 3 > len {
                    return None;
                }
                write(o, pointer - 1, &addr)?;
                pointer += 4;
            }
            o[2] = pointer as u8;
        }
        n += len;
    }
    if let Some(start) = found.timestamp {
        let len = usize::from(*options.get(start + 1)?);
        let o = out.bytes.get_mut(n..n + len)?;
        o.copy_from_slice(options.get(start..start + len)?);
        let flags = *o.get(3)? & 0x0f;
        let mut pointer = usize::from(o[2]);
        if pointer < 5 {
            return None;
        }
        if pointer > len {
            // Full: one more host that could not enter itself.
            o[3] = o[3].wrapping_add(0x10);
        } else {
            // As the request arrived.
            let (mut needs_addr, mut needs_time) = (false, false);
            match flags {
                TS_ONLY => {
                    write(o, pointer - 1, &time)?;
                    pointer += 4;
                    needs_time = true;
                }
                TS_AND_ADDRESS => {
                    write(o, pointer - 1, &addr)?;
                    write(o, pointer + 3, &time)?;
                    pointer += 8;
                    (needs_addr, needs_time) = (true, true);
                }
                TS_PRESPECIFIED if own(read_addr(o, pointer - 1)?) => {
                    write(o, pointer + 3, &time)?;
                    pointer += 8;
                    needs_time = true;
                }
                _ => {}
            }
            // As the reply leaves.
            if pointer <= len {
                let mut entered = 0;
                if needs_addr {
                    if pointer + 3 > len {
                        return None;
                    }
                    write(o, pointer - 1, &addr)?;
                    entered += 4;
                }
                if needs_time {
                    if pointer + entered + 3 > len {
                        return None;
                    }
                    if flags != TS_PRESPECIFIED {
                        write(o, pointer + entered - 1, &time)?;
                        entered += 4;
                    } else if pointer + 7 <= len && own(read_addr(o, pointer - 1)?) {
                        write(o, pointer + 3, &time)?;
                        entered += 8;
                    }
                }
                pointer += entered;
            }
            o[2] = pointer as u8;
        }
        n += len;
    }
    // Padded with end-of-list bytes to a 32-bit boundary.
    out.len = n.next_multiple_of(4) as u8;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const T: u32 = 0x0102_0304;

    fn ours(a: Ipv4Addr) -> bool {
        a == US
    }

    #[test]
    fn valid_areas_are_accepted_and_found() {
        assert_eq!(check(&[]), Ok(Found::default()));
        assert_eq!(check(&[NOOP, NOOP, NOOP, END]), Ok(Found::default()));
        // Anything after the end of the list is not read.
        assert_eq!(check(&[END, 0xff, 0, 0]), Ok(Found::default()));
        let mut rr = vec![NOOP, RECORD_ROUTE, 11, 4];
        rr.extend_from_slice(&[0; 8]);
        assert_eq!(
            check(&rr),
            Ok(Found {
                record_route: Some(1),
                timestamp: None
            })
        );
        // Full record route and timestamp options are valid.
        assert!(check(&[RECORD_ROUTE, 7, 8, 1, 2, 3, 4, END]).is_ok());
        assert!(check(&[TIMESTAMP, 8, 9, 0x10, 0, 0, 0, 0]).is_ok());
        // Unknown options, and the security option, are skipped.
        assert!(check(&[0x99, 4, 0, 0, 130, 4, 0, 0]).is_ok());
        assert!(check(&[ROUTER_ALERT, 4, 0, 0]).is_ok());
    }

    /// The pointer of each malformation, from the start of the header, as Linux's
    /// `ip_options_compile` names it.
    #[test]
    fn malformed_options_name_the_byte_at_fault() {
        let cases: &[(&[u8], u8)] = &[
            (&[RECORD_ROUTE], 20),                      // no length byte
            (&[NOOP, 0x99, 0, 0], 21),                  // length 0
            (&[0x99, 1, 0, 0], 20),                     // length 1
            (&[NOOP, NOOP, 0x99, 3], 22),               // past the area
            (&[RECORD_ROUTE, 2, 0, 0], 21),             // too short for a pointer
            (&[RECORD_ROUTE, 7, 3, 0, 0, 0, 0], 22),    // pointer below 4
            (&[RECORD_ROUTE, 6, 4, 0, 0, 0], 22),       // room for part of an address
            (&[TIMESTAMP, 3, 5, 0], 21),                // too short for the flags
            (&[TIMESTAMP, 8, 4, 0, 0, 0, 0, 0], 22),    // pointer below 5
            (&[TIMESTAMP, 8, 5, 1, 0, 0, 0, 0], 22),    // no room for address and time
            (&[TIMESTAMP, 8, 9, 0xf0, 0, 0, 0, 0], 23), // overflow count at 15
            (&[LOOSE_SOURCE_ROUTE, 2, 0, 0], 21),
            (&[STRICT_SOURCE_ROUTE, 7, 2, 0, 0, 0, 0], 22),
            (
                &[
                    LOOSE_SOURCE_ROUTE,
                    3,
                    4,
                    STRICT_SOURCE_ROUTE,
                    3,
                    4,
                    END,
                    END,
                ],
                23,
            ),
            (&[ROUTER_ALERT, 2, 0, 0], 21),
        ];
        for (options, pointer) in cases {
            assert_eq!(check(options), Err(*pointer), "{options:?}");
        }
    }

    #[test]
    fn arbitrary_areas_never_panic() {
        let mut rng = crate::rng::Rng::new(7);
        for _ in 0..20_000 {
            let len = (rng.next_u64() % 41) as usize;
            let mut o = vec![0u8; len];
            rng.fill(&mut o);
            if let Ok(found) = check(&o) {
                let _ = echo(&o, found, US, T, ours);
            }
        }
    }

    /// Record route with room for three addresses: this host enters itself as the request arrives
    /// and as the reply leaves (so `ping -R` lists it twice, as it does for Linux).
    #[test]
    fn record_route_is_echoed_with_this_host_entered_twice() {
        let mut rr = vec![RECORD_ROUTE, 15, 8, 10, 0, 0, 1];
        rr.extend_from_slice(&[0; 8]);
        rr.push(END);
        let found = check(&rr).unwrap();
        let out = echo(&rr, found, US, T, ours).unwrap();
        assert_eq!(
            out.as_slice(),
            &[
                RECORD_ROUTE,
                15,
                16,
                10,
                0,
                0,
                1,
                10,
                0,
                0,
                2,
                10,
                0,
                0,
                2,
                END
            ]
        );
        // Room for one more: entered as the request arrived only.
        let rr = [RECORD_ROUTE, 7, 4, 0, 0, 0, 0, END];
        let out = echo(&rr, check(&rr).unwrap(), US, T, ours).unwrap();
        assert_eq!(out.as_slice(), &[RECORD_ROUTE, 7, 8, 10, 0, 0, 2, END]);
        // Full: copied as it came.
        let rr = [RECORD_ROUTE, 7, 8, 1, 2, 3, 4, END];
        let out = echo(&rr, check(&rr).unwrap(), US, T, ours).unwrap();
        assert_eq!(out.as_slice(), &rr);
    }

    #[test]
    fn timestamps_are_echoed_with_this_hosts_entries() {
        // Timestamps only, room for two.
        let ts = [TIMESTAMP, 12, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let out = echo(&ts, check(&ts).unwrap(), US, T, ours).unwrap();
        assert_eq!(
            out.as_slice(),
            &[TIMESTAMP, 12, 13, 0, 1, 2, 3, 4, 1, 2, 3, 4]
        );
        // Addresses and timestamps, room for two pairs.
        let mut ts = vec![TIMESTAMP, 20, 5, 1];
        ts.extend_from_slice(&[0; 16]);
        let out = echo(&ts, check(&ts).unwrap(), US, T, ours).unwrap();
        let mut want = vec![TIMESTAMP, 20, 21, 1];
        for _ in 0..2 {
            want.extend_from_slice(&[10, 0, 0, 2, 1, 2, 3, 4]);
        }
        assert_eq!(out.as_slice(), &want[..]);
        // Prespecified: only the entries naming this host are filled.
        let mut ts = vec![TIMESTAMP, 20, 5, 3];
        ts.extend_from_slice(&[10, 0, 0, 2, 0, 0, 0, 0, 10, 0, 0, 9, 0, 0, 0, 0]);
        let out = echo(&ts, check(&ts).unwrap(), US, T, ours).unwrap();
        let mut want = vec![TIMESTAMP, 20, 13, 3];
        want.extend_from_slice(&[10, 0, 0, 2, 1, 2, 3, 4, 10, 0, 0, 9, 0, 0, 0, 0]);
        assert_eq!(out.as_slice(), &want[..]);
        // Full: the overflow count goes up by one.
        let ts = [TIMESTAMP, 8, 9, 0x20, 9, 9, 9, 9];
        let out = echo(&ts, check(&ts).unwrap(), US, T, ours).unwrap();
        assert_eq!(out.as_slice(), &[TIMESTAMP, 8, 9, 0x30, 9, 9, 9, 9]);
    }

    /// Both, in the other order, with a router alert and padding: the reply has record route
    /// first, then timestamp, and nothing else.
    #[test]
    fn only_record_route_and_timestamp_are_echoed_in_that_order() {
        let mut o = vec![ROUTER_ALERT, 4, 0, 0, TIMESTAMP, 8, 5, 0, 0, 0, 0, 0];
        o.extend_from_slice(&[NOOP, RECORD_ROUTE, 7, 4, 0, 0, 0, END]);
        let out = echo(&o, check(&o).unwrap(), US, T, ours).unwrap();
        assert_eq!(
            out.as_slice(),
            &[
                RECORD_ROUTE,
                7,
                8,
                10,
                0,
                0,
                2,
                TIMESTAMP,
                8,
                9,
                0,
                1,
                2,
                3,
                4,
                END
            ]
        );
        // Neither: no options.
        let o = [ROUTER_ALERT, 4, 0, 0];
        assert!(echo(&o, check(&o).unwrap(), US, T, ours)
            .unwrap()
            .is_empty());
    }

    /// A record route with room for an entry and part of another: entered as the request arrives,
    /// the rest cannot be, and there is no reply (as in Linux).
    #[test]
    fn room_for_part_of_an_entry_after_the_first_means_no_reply() {
        let rr = [RECORD_ROUTE, 9, 4, 0, 0, 0, 0, 0, 0, END, END, END];
        let found = check(&rr).unwrap();
        assert_eq!(echo(&rr, found, US, T, ours), None);
    }
}
