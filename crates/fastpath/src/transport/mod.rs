//! What UDP and TCP share, each in one home: the transport checksum decision and the routines that
//! carry it out ([`checksum`]), the generational table their sockets live in ([`slots`]), and the
//! allocator of local ports ([`ports`]), and the receive queue ([`ring`]).

pub(crate) mod checksum;
pub(crate) mod network;
pub(crate) mod ports;
pub(crate) mod ring;
pub(crate) mod slots;
