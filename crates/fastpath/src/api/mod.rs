//! The application's API: handles that borrow the whole stack for a call (`stack.udp(s).send_to(..)`,
//! `stack.tcp(c).read(..)`), shaped like `std::net`'s sockets. This is the only code above the stack:
//! the layers below never see it.

pub mod intercept;
pub mod ready;
pub mod tcp;
pub mod udp;
