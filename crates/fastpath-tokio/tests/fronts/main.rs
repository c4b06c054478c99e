//! The async fronts' tests, in one binary (one link, not three): `pair` drives the `LocalSet` front
//! over the in-memory pair, `send` the `Send` front on the multi-threaded runtime, and `tun` the
//! kernel's clients against a server on either front over a TUN interface (Linux, root).

mod pair;
mod send;
mod tun;
