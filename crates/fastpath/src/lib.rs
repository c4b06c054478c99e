//! fastpath: a user-space UDP/IPv4 network stack that implements, switchably and measurably, the end-system
//! fast paths of the classic papers (see the README's technique map).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod checksum;
pub mod wire;
