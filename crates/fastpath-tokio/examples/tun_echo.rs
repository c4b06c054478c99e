//! An async TCP and UDP echo server on a TUN interface (root): `tun_echo [NETNS]`. It creates network
//! namespace NETNS (default `fpecho`) if missing, a TUN interface `fpe0` in it with the kernel at
//! 10.8.0.1/24 and fd00:8::1/64, and serves echo on port 7 of 10.8.0.2 and fd00:8::2 (one dual-stack
//! listener and socket each) until interrupted. Try: `ip netns exec fpecho nc 10.8.0.2 7`.

#[cfg(target_os = "linux")]
mod common;

#[cfg(target_os = "linux")]
use std::net::SocketAddr;

#[cfg(target_os = "linux")]
use fastpath_tokio::{Net, TcpListener, UdpSocket};
#[cfg(target_os = "linux")]
use tokio::task::LocalSet;

/// TUN interfaces are Linux's.
#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("tun_echo needs a Linux TUN interface");
}

#[cfg(target_os = "linux")]
fn main() -> std::io::Result<()> {
    let ns = std::env::args().nth(1).unwrap_or_else(|| "fpecho".into());
    let (stack, tun) = common::tun_stack(&ns, "fpe0", "10.8.0", "fd00:8")?;

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
