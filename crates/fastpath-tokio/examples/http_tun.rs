//! An HTTP/1.1 server built with `hyper` on fastpath's streams, on a TUN interface (root):
//! `http_tun [NETNS]`. It creates network namespace NETNS (default `fphttp`) if missing, a TUN
//! interface `fph0` in it with the kernel at 10.8.1.1/24 and fd00:81::1/64, and serves on port 80 of
//! 10.8.1.2 and fd00:81::2 until interrupted. Try: `ip netns exec fphttp curl http://10.8.1.2/`.

#[cfg(target_os = "linux")]
mod common;

#[cfg(target_os = "linux")]
use std::net::SocketAddr;

#[cfg(target_os = "linux")]
use fastpath_tokio::{Net, TcpListener};
#[cfg(target_os = "linux")]
use tokio::task::LocalSet;

/// TUN interfaces are Linux's.
#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("http_tun needs a Linux TUN interface");
}

#[cfg(target_os = "linux")]
fn main() -> std::io::Result<()> {
    let ns = std::env::args().nth(1).unwrap_or_else(|| "fphttp".into());
    let (stack, tun) = common::tun_stack(&ns, "fph0", "10.8.1", "fd00:81")?;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = LocalSet::new();
    local.block_on(&runtime, async move {
        let net = Net::with_tun(stack, tun)?;
        tokio::task::spawn_local(net.clone().drive());
        let any: SocketAddr = "[::]:80".parse().unwrap();
        let listener = TcpListener::bind(&net, any, 128)?;
        println!("HTTP on 10.8.1.2:80 and [fd00:81::2]:80, in namespace {ns}");
        loop {
            let (conn, peer) = listener.accept().await?;
            let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
                let body = format!(
                    "{} {} from {peer}, served by fastpath\n",
                    req.method(),
                    req.uri()
                );
                async move {
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(
                        http_body_util::Full::new(hyper::body::Bytes::from(body)),
                    ))
                }
            });
            tokio::task::spawn_local(async move {
                let io = hyper_util::rt::TokioIo::new(conn);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    })
}
