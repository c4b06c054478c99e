//! An async TCP and UDP echo server on a TUN interface (root): `tun_echo [NETNS]`. It creates network
//! namespace NETNS (default `fpecho`) if missing, a TUN interface `fpe0` in it with the kernel at
//! 10.8.0.1/24 and fd00:8::1/64, and serves echo on port 7 of 10.8.0.2 and fd00:8::2 (one dual-stack
//! listener and socket each) until interrupted. Try: `ip netns exec fpecho nc 10.8.0.2 7`.

use std::net::SocketAddr;
use std::process::Command;

use fastpath::link::{TunConfig, TunLink};
use fastpath::{Ipv4Cidr, Stack, StackConfig};
use fastpath_tokio::{Net, TcpListener, UdpSocket};
use tokio::task::LocalSet;

fn ip(ns: &str, args: &[&str]) -> std::io::Result<()> {
    let status = Command::new("ip").args(["-n", ns]).args(args).status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("ip -n {ns} {args:?} failed")))
    }
}

fn main() -> std::io::Result<()> {
    let ns = std::env::args().nth(1).unwrap_or_else(|| "fpecho".into());
    let _ = Command::new("ip").args(["netns", "add", &ns]).status();
    let link = TunLink::open(&TunConfig {
        name: "fpe0".into(),
        netns: Some(ns.clone()),
        mtu: 1500,
        offload: true,
        uso: false,
    })?;
    ip(&ns, &["addr", "add", "10.8.0.1/24", "dev", "fpe0"])?;
    ip(
        &ns,
        &["-6", "addr", "add", "fd00:8::1/64", "dev", "fpe0", "nodad"],
    )?;
    ip(&ns, &["link", "set", "dev", "fpe0", "up"])?;
    let tun = link.handle();
    let mut stack = Stack::new(StackConfig::default());
    let iface = stack.add_interface("fpe0", link, "10.8.0.2/24".parse::<Ipv4Cidr>().unwrap());
    stack.add_ipv6_address(iface, "fd00:8::2/64".parse().unwrap())?;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = LocalSet::new();
    local.block_on(&runtime, async move {
        let net = Net::with_tun(stack, tun)?;
        tokio::task::spawn_local(net.clone().drive());
        let any: SocketAddr = "[::]:7".parse().unwrap();
        let listener = TcpListener::bind(&net, any, 128)?;
        let udp = UdpSocket::bind(&net, any)?;
        tokio::task::spawn_local(async move {
            let mut buf = vec![0u8; 65536];
            while let Ok((n, peer)) = udp.recv_from(&mut buf).await {
                let _ = udp.send_to(&buf[..n], peer).await;
            }
        });
        println!("echo on 10.8.0.2:7 and [fd00:8::2]:7 (TCP and UDP), in namespace {ns}");
        loop {
            let (conn, _) = listener.accept().await?;
            tokio::task::spawn_local(async move {
                let (mut r, mut w) = tokio::io::split(conn);
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = tokio::io::AsyncWriteExt::shutdown(&mut w).await;
            });
        }
    })
}
