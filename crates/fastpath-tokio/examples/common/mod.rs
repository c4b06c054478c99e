//! What both TUN examples set up: a namespace (made if missing), a TUN interface in it with the
//! kernel at `V4.1/24` and `V6::1/64`, and a stack at `V4.2` and `V6::2` on the other end.

use std::process::Command;

use fastpath::link::{TunConfig, TunLink};
use fastpath::{Ipv4Cidr, Stack, StackConfig, TunHandle};

fn ip(ns: &str, args: &[&str]) -> std::io::Result<()> {
    let status = Command::new("ip").args(["-n", ns]).args(args).status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("ip -n {ns} {args:?} failed")))
    }
}

/// The stack and the TUN handle its driver sleeps on, on the /24 `v4` (three octets) and the /64
/// `v6` (its first groups).
pub fn tun_stack(ns: &str, dev: &str, v4: &str, v6: &str) -> std::io::Result<(Stack, TunHandle)> {
    let _ = Command::new("ip").args(["netns", "add", ns]).status();
    let link = TunLink::open(&TunConfig {
        name: dev.into(),
        netns: Some(ns.to_string()),
        mtu: 1500,
        offload: true,
        uso: false,
        io_uring: true,
        tap: None,
    })?;
    ip(ns, &["addr", "add", &format!("{v4}.1/24"), "dev", dev])?;
    let kernel6 = format!("{v6}::1/64");
    ip(ns, &["-6", "addr", "add", &kernel6, "dev", dev, "nodad"])?;
    ip(ns, &["link", "set", "dev", dev, "up"])?;
    let tun = link.handle();
    let mut stack = Stack::new(StackConfig::default());
    let cidr: Ipv4Cidr = format!("{v4}.2/24").parse().expect("a prefix");
    let iface = stack.add_interface(dev, link, cidr);
    stack.add_ipv6_address(iface, format!("{v6}::2/64").parse().expect("a prefix"))?;
    Ok((stack, tun))
}
