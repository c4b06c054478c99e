//! The per-stack secret and the keyed pseudo-random function behind every value an off-path attacker
//! must not predict: TCP's initial sequence numbers (RFC 6528 §3 asks for a keyed PRF), SYN cookies,
//! the IPv4 and IPv6 identification fields (RFC 7739 §5), and which destinations share a bucket of
//! the ICMP error limit.
//!
//! The function is SipHash-2-4 (Aumasson and Bernstein, 2012) with a 128-bit key drawn from the
//! operating system's random source, as netstack3 and Linux use for the same values. Each use derives
//! its own key from the stack's ([`SecretKey::derive`]), so no two uses ever hash the same message
//! under the same key, and every message is a fixed layout of bytes written here (addresses, then
//! ports, then the use's own fields), not the output of `std::hash::Hash`, whose layout std does not
//! promise to keep.

use std::hash::Hasher;

use siphasher::sip::SipHasher24;

/// A 128-bit key for [`SecretKey::prf`]. Its `Debug` output hides the key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SecretKey([u8; 16]);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

impl SecretKey {
    /// A fresh key from the operating system's random source (`getrandom(2)` on Linux).
    ///
    /// # Panics
    /// If the operating system has no random source to give, which a stack cannot do without.
    pub fn random() -> SecretKey {
        let mut key = [0u8; 16];
        getrandom::fill(&mut key).expect("the operating system's random source");
        SecretKey(key)
    }

    /// A key given by the caller: for reproducible runs (tests, traces), never for a stack that
    /// faces a network it does not trust.
    pub const fn from_bytes(key: [u8; 16]) -> SecretKey {
        SecretKey(key)
    }

    /// SipHash-2-4 of `message` under this key.
    pub fn prf(&self, message: &[u8]) -> u64 {
        let mut h = SipHasher24::new_with_key(&self.0);
        h.write(message);
        h.finish()
    }

    /// A key of its own for one use, named by `label`: the PRF of the label with a 0 and a 1 byte
    /// appended, as the key's two halves.
    pub fn derive(&self, label: &str) -> SecretKey {
        let half = |i: u8| {
            let mut h = SipHasher24::new_with_key(&self.0);
            h.write(label.as_bytes());
            h.write(&[i]);
            h.finish()
        };
        let (low, high) = (half(0), half(1));
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&low.to_le_bytes());
        key[8..].copy_from_slice(&high.to_le_bytes());
        SecretKey(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SipHash paper's test vector (appendix A): key 00 01 .. 0f, message 00 01 .. 0e.
    #[test]
    fn prf_is_siphash_2_4() {
        let key: [u8; 16] = std::array::from_fn(|i| i as u8);
        let message: [u8; 15] = std::array::from_fn(|i| i as u8);
        assert_eq!(
            SecretKey::from_bytes(key).prf(&message),
            0xa129_ca61_49be_45e5
        );
        // And the empty message (the reference implementation's vectors.h, first entry).
        assert_eq!(SecretKey::from_bytes(key).prf(&[]), 0x726f_db47_dd0e_0e31);
    }

    #[test]
    fn random_keys_differ_and_derived_keys_differ_by_label() {
        let (a, b) = (SecretKey::random(), SecretKey::random());
        assert_ne!(a, b);
        assert_ne!(a.derive("tcp4"), a.derive("tcp6"));
        assert_eq!(a.derive("tcp4"), a.derive("tcp4"));
        // The halves are the PRF of the label with a 0 and a 1 byte appended.
        assert_eq!(a.derive("tcp4").0[..8], a.prf(b"tcp4\0").to_le_bytes());
        assert_eq!(a.derive("tcp4").0[8..], a.prf(b"tcp4\x01").to_le_bytes());
        assert_ne!(a.derive("tcp4"), b.derive("tcp4"));
        assert_eq!(format!("{a:?}"), "SecretKey(..)");
    }
}
