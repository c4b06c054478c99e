//! Fake DNS for the tunnel (`--fake-dns CIDR`): the tunnel answers the applications' DNS queries for
//! IPv4 addresses itself, with an address from a reserved range that stands for the name, and
//! connects to the name when an application connects to that address. Through SOCKS5 the name goes
//! to the proxy (RFC 1928's domain-name address type), which resolves it where it is: no query
//! leaves the host outside the proxy, and a proxy that relays no UDP still serves names. Directly,
//! the tunnel resolves the name with the host's resolver.
//!
//! Queries are hostile input like any packet: the parser reads only what the header and labels
//! promise, within the datagram, and anything that is not one plain question for an address (or a
//! name it cannot pass on) is left alone, to be relayed to its destination as any other datagram.
//! The table is bounded: addresses are handed out in turn, and when the range is used up the oldest
//! name loses its address to the new one.

use std::collections::HashMap;
use std::net::Ipv4Addr;

/// The TTL of an answer, in seconds: short, so that an application asks again rather than keep an
/// address that may have gone to another name.
pub const TTL: u32 = 10;

/// Most names the table holds, whatever the range (the first this many addresses of a larger one).
pub const MAX_NAMES: u32 = 65_536;

/// Query types answered.
const TYPE_A: u16 = 1;
const TYPE_AAAA: u16 = 28;
const CLASS_IN: u16 = 1;

/// Names to addresses of a range, and back.
#[derive(Debug)]
pub struct FakeDns {
    network: u32,
    mask: u32,
    /// Addresses usable: offsets `1 .. size` of the range (the range's first is not used).
    size: u32,
    /// The offset the next new name takes.
    next: u32,
    /// Offsets never handed out: the tunnel's own addresses, should they lie in the range.
    reserved: Vec<u32>,
    names: HashMap<u32, Box<str>>,
    addrs: HashMap<Box<str>, u32>,
}

/// What [`FakeDns::answer`] made of a datagram to port 53.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// The reply to send back: an address for an `A` query, no address for `AAAA` (the application
    /// then uses IPv4).
    Reply(Vec<u8>),
    /// Not a query this table answers: relay it as any other datagram.
    Pass,
}

impl FakeDns {
    /// A table over `network/prefix` (a prefix of 8 to 30 bits).
    pub fn new(network: Ipv4Addr, prefix: u8) -> Result<FakeDns, String> {
        if !(8..=30).contains(&prefix) {
            return Err(format!(
                "a fake DNS range of /{prefix}: give one from /8 to /30"
            ));
        }
        let mask = u32::MAX << (32 - prefix);
        let network = u32::from(network) & mask;
        let size = (1u64 << (32 - prefix)).min(u64::from(MAX_NAMES)) as u32;
        Ok(FakeDns {
            network,
            mask,
            size,
            next: 1,
            reserved: Vec::new(),
            names: HashMap::new(),
            addrs: HashMap::new(),
        })
    }

    /// Never hands out `addr`: an address in use on the link (the kernel's, fastpath's), should it
    /// lie in the range, must not stand for a name. The tunnel refuses a range that overlaps its
    /// link; this keeps the table right whatever it is given. Fails if no address would be left
    /// for names.
    pub fn reserve(&mut self, addr: Ipv4Addr) -> Result<(), String> {
        if !self.contains(addr) {
            return Ok(());
        }
        let offset = u32::from(addr) - self.network;
        if offset == 0 || offset >= self.size || self.reserved.contains(&offset) {
            return Ok(());
        }
        // Offsets 1 .. size are usable: keep one for names.
        if self.reserved.len() as u32 + 2 >= self.size {
            return Err(format!(
                "the fake DNS range {}/{} has no address left for names besides {addr}",
                Ipv4Addr::from(self.network),
                32 - self.mask.count_zeros()
            ));
        }
        self.reserved.push(offset);
        Ok(())
    }

    /// True when `addr` is in the range (whether or not a name has it now, or can).
    pub fn contains(&self, addr: Ipv4Addr) -> bool {
        u32::from(addr) & self.mask == self.network
    }

    /// The name `addr` stands for, if it stands for one.
    pub fn name_of(&self, addr: Ipv4Addr) -> Option<&str> {
        let offset = u32::from(addr).wrapping_sub(self.network);
        self.names.get(&offset).map(|n| &**n)
    }

    /// The address standing for `name` (lower case): the one it has, or the next in turn, taken
    /// from the name that had it.
    pub fn address_for(&mut self, name: &str) -> Ipv4Addr {
        if let Some(&offset) = self.addrs.get(name) {
            return Ipv4Addr::from(self.network + offset);
        }
        let mut offset = self.next;
        while self.reserved.contains(&offset) {
            offset = self.after(offset);
        }
        self.next = self.after(offset);
        if let Some(old) = self.names.remove(&offset) {
            self.addrs.remove(&old);
        }
        let name: Box<str> = name.into();
        self.names.insert(offset, name.clone());
        self.addrs.insert(name, offset);
        Ipv4Addr::from(self.network + offset)
    }

    /// The offset handed out after `offset`, in turn (offset 0, the range's first, is not used).
    fn after(&self, offset: u32) -> u32 {
        if offset + 1 >= self.size {
            1
        } else {
            offset + 1
        }
    }

    /// Names held now.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when no name has an address.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The reply to `query` (a datagram sent to port 53), or [`Answer::Pass`].
    pub fn answer(&mut self, query: &[u8]) -> Answer {
        let Some(q) = Question::parse(query) else {
            return Answer::Pass;
        };
        let address = match q.qtype {
            TYPE_A => Some(self.address_for(&q.name)),
            TYPE_AAAA => None,
            _ => return Answer::Pass,
        };
        // The header: the query's ID and RD, QR and RA set, one question, and the answer if any.
        let mut r = Vec::with_capacity(q.end + 16);
        r.extend_from_slice(&query[..2]);
        r.push(0x80 | (query[2] & 0x01));
        r.push(0x80);
        r.extend_from_slice(&[0, 1, 0, u8::from(address.is_some()), 0, 0, 0, 0]);
        r.extend_from_slice(&query[12..q.end]);
        if let Some(a) = address {
            // The name by a pointer to the question's (offset 12), type A, class IN, TTL, 4 bytes.
            r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
            r.extend_from_slice(&TTL.to_be_bytes());
            r.extend_from_slice(&[0, 4]);
            r.extend_from_slice(&a.octets());
        }
        Answer::Reply(r)
    }
}

/// The one question of a standard query.
#[derive(Debug)]
struct Question {
    /// The name, lower case, labels joined by dots.
    name: String,
    qtype: u16,
    /// Where the question ends in the datagram.
    end: usize,
}

impl Question {
    /// One question for class IN in a standard query (QR 0, OPCODE 0, one question, no answer or
    /// authority records; additional records such as EDNS's are ignored), its name made of labels
    /// of letters, digits, `-` and `_`, at most 253 characters. Anything else is `None`.
    fn parse(m: &[u8]) -> Option<Question> {
        let header = m.get(..12)?;
        let flags = u16::from_be_bytes([header[2], header[3]]);
        let count = |i: usize| u16::from_be_bytes([header[i], header[i + 1]]);
        if flags & 0xf800 != 0 || count(4) != 1 || count(6) != 0 || count(8) != 0 {
            return None;
        }
        let mut name = String::new();
        let mut at = 12;
        loop {
            let len = usize::from(*m.get(at)?);
            at += 1;
            if len == 0 {
                break;
            }
            // 64 and up are compression pointers or reserved: a question's name has none.
            if len > 63 {
                return None;
            }
            let label = m.get(at..at + len)?;
            if !label
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
            {
                return None;
            }
            if !name.is_empty() {
                name.push('.');
            }
            name.extend(label.iter().map(|b| b.to_ascii_lowercase() as char));
            if name.len() > 253 {
                return None;
            }
            at += len;
        }
        if name.is_empty() {
            return None;
        }
        let tail = m.get(at..at + 4)?;
        let qtype = u16::from_be_bytes([tail[0], tail[1]]);
        if u16::from_be_bytes([tail[2], tail[3]]) != CLASS_IN {
            return None;
        }
        Some(Question {
            name,
            qtype,
            end: at + 4,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query for `name` of `qtype`, ID 0x1234, recursion desired.
    fn query(name: &str, qtype: u16) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            m.push(label.len() as u8);
            m.extend_from_slice(label.as_bytes());
        }
        m.push(0);
        m.extend_from_slice(&qtype.to_be_bytes());
        m.extend_from_slice(&CLASS_IN.to_be_bytes());
        m
    }

    fn table() -> FakeDns {
        FakeDns::new(Ipv4Addr::new(198, 18, 0, 0), 15).unwrap()
    }

    #[test]
    fn an_a_query_is_answered_with_an_address_of_the_range_that_names_it() {
        let mut t = table();
        let q = query("Example.COM", TYPE_A);
        let Answer::Reply(r) = t.answer(&q) else {
            panic!("answered")
        };
        let mut want = vec![0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0];
        want.extend_from_slice(&q[12..]);
        want.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 10, 0, 4, 198, 18, 0, 1]);
        assert_eq!(r, want);
        assert_eq!(t.name_of(Ipv4Addr::new(198, 18, 0, 1)), Some("example.com"));
        assert!(t.contains(Ipv4Addr::new(198, 19, 255, 255)));
        assert!(!t.contains(Ipv4Addr::new(198, 20, 0, 0)));
        // The same name keeps its address; another takes the next.
        let again = t.answer(&query("example.com", TYPE_A));
        assert!(matches!(again, Answer::Reply(r) if r.ends_with(&[198, 18, 0, 1])));
        assert_eq!(t.address_for("other.org"), Ipv4Addr::new(198, 18, 0, 2));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn an_aaaa_query_gets_no_address_and_others_are_passed_on() {
        let mut t = table();
        let q = query("example.com", TYPE_AAAA);
        let Answer::Reply(r) = t.answer(&q) else {
            panic!("answered")
        };
        assert_eq!(&r[4..12], &[0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(r.len(), q.len());
        assert_eq!(t.len(), 0);
        assert_eq!(t.answer(&query("example.com", 15)), Answer::Pass);
    }

    #[test]
    fn a_used_up_range_gives_the_oldest_names_address_to_the_new_one() {
        let mut t = FakeDns::new(Ipv4Addr::new(10, 9, 9, 0), 30).unwrap();
        // Offsets 1, 2, 3 of a /30.
        let a = t.address_for("a");
        t.address_for("b");
        t.address_for("c");
        assert_eq!(t.address_for("d"), a);
        assert_eq!(t.name_of(a), Some("d"));
        assert_eq!(t.len(), 3);
        assert_eq!(t.address_for("a"), Ipv4Addr::new(10, 9, 9, 2));
        assert_eq!(t.len(), 3);
        assert!(FakeDns::new(Ipv4Addr::new(10, 0, 0, 0), 31).is_err());
    }

    #[test]
    fn reserved_addresses_never_stand_for_a_name() {
        // A /29 holding the link's two addresses: offsets 1 to 7, less 2 and 5.
        let mut t = FakeDns::new(Ipv4Addr::new(10, 66, 0, 0), 29).unwrap();
        let (kernel, own) = (Ipv4Addr::new(10, 66, 0, 2), Ipv4Addr::new(10, 66, 0, 5));
        t.reserve(kernel).unwrap();
        t.reserve(own).unwrap();
        // Outside the range: nothing to keep out.
        t.reserve(Ipv4Addr::new(192, 0, 2, 1)).unwrap();
        let mut given = Vec::new();
        for i in 0..20 {
            let a = t.address_for(&format!("name{i}.example"));
            assert_ne!(a, kernel, "name{i} got the kernel's address");
            assert_ne!(a, own, "name{i} got fastpath's address");
            given.push(a.octets()[3]);
        }
        assert_eq!(&given[..7], &[1, 3, 4, 6, 7, 1, 3]);
        assert_eq!(t.len(), 5);
        assert_eq!(t.name_of(kernel), None);
        // A /30 has three addresses: two may be kept out, not three.
        let mut t = FakeDns::new(Ipv4Addr::new(10, 9, 9, 0), 30).unwrap();
        t.reserve(Ipv4Addr::new(10, 9, 9, 1)).unwrap();
        t.reserve(Ipv4Addr::new(10, 9, 9, 2)).unwrap();
        assert!(t.reserve(Ipv4Addr::new(10, 9, 9, 3)).is_err());
        assert_eq!(t.address_for("a"), Ipv4Addr::new(10, 9, 9, 3));
        assert_eq!(t.address_for("b"), Ipv4Addr::new(10, 9, 9, 3));
    }

    #[test]
    fn what_is_not_one_plain_question_is_passed_on() {
        let mut t = table();
        let good = query("example.com", TYPE_A);
        let mut cases: Vec<Vec<u8>> = vec![
            Vec::new(),
            good[..11].to_vec(),
            good[..good.len() - 1].to_vec(),
        ];
        // A response, another opcode, two questions, an answer record.
        for (i, v) in [(2, 0x81), (2, 0x09), (5, 2), (7, 1)] {
            let mut m = good.clone();
            m[i] = v;
            cases.push(m);
        }
        // A compression pointer, a dot or a space in a label, an empty name, class CH.
        let mut m = good.clone();
        m[12] = 0xc0;
        cases.push(m);
        cases.push(
            query("exa.mple.com", TYPE_A)
                .iter()
                .map(|&b| if b == b'm' { b'.' } else { b })
                .collect(),
        );
        cases.push(query("ex mple.com", TYPE_A));
        let mut m = good[..12].to_vec();
        m.extend_from_slice(&[0, 0, 1, 0, 1]);
        cases.push(m);
        let mut m = good.clone();
        let n = m.len();
        m[n - 1] = 3;
        cases.push(m);
        // A name over 253 characters.
        cases.push(query(&vec!["a".repeat(63); 5].join("."), TYPE_A));
        for (i, c) in cases.iter().enumerate() {
            assert_eq!(t.answer(c), Answer::Pass, "case {i}");
        }
        assert_eq!(t.len(), 0);
    }

    proptest::proptest! {
        /// Any bytes: an answer or a pass, never a panic, and a reply only ever for a question.
        #[test]
        fn any_datagram_is_answered_or_passed(m in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let mut t = table();
            if let Answer::Reply(r) = t.answer(&m) {
                proptest::prop_assert!(r.len() >= 12 + 5);
                proptest::prop_assert_eq!(&r[..2], &m[..2]);
            }
        }

        /// Any well-formed question of letters and digits is answered, with an address that names it.
        #[test]
        fn any_plain_name_is_answered(labels in proptest::collection::vec("[a-z0-9]{1,20}", 1..6)) {
            let mut t = table();
            let name = labels.join(".");
            let q = query(&name, TYPE_A);
            let Answer::Reply(r) = t.answer(&q) else {
                return Err(proptest::test_runner::TestCaseError::fail("not answered"));
            };
            let a: [u8; 4] = r[r.len() - 4..].try_into().unwrap();
            proptest::prop_assert_eq!(t.name_of(Ipv4Addr::from(a)), Some(name.as_str()));
        }
    }
}
