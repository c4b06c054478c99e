//! fastpath under packetdrill: a shared object that `packetdrill --so_filename=...` loads instead of
//! testing the kernel. packetdrill calls `packetdrill_interface_init`, which fills its table of
//! functions (socket calls, packet injection and capture, the clock) with this crate's, all served by
//! one [`fastpath::Stack`] on an in-memory link and a virtual clock ([`shim::Shim`]).
//!
//! [`shim`] is the safe socket layer (the tests call it directly); [`ffi`] is the C boundary, the
//! only place with `unsafe`.

pub mod ffi;
pub mod shim;

pub use shim::{Errno, Shim, ShimConfig};
