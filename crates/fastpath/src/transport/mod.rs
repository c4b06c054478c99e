//! What UDP and TCP share, each in one home: the transport checksum decision and the routines that
//! carry it out ([`checksum`]), the generational table their sockets live in ([`slots`]), and the
//! allocator of local ports ([`ports`]), the receive queue ([`ring`]), and the readiness hints an
//! event loop takes ([`hints`]).

pub(crate) mod checksum;
pub(crate) mod hints;
pub(crate) mod network;
pub(crate) mod ports;
pub(crate) mod slots;
