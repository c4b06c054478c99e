//! tun2proxy as a row of `bench tunnel`: the tun2socks of the Rust ecosystem, on the `ipstack`
//! user-space stack (which grew out of smoltcp's model), relaying through Debian's dante SOCKS5
//! server as the lwIP row does.
//!
//! tun2proxy 0.8.3 from crates.io, its own binary (`tun2proxy-bin`): found with `--tun2proxy PATH`,
//! or installed before into `target/peers/tun2proxy`, or installed now with `--build-tun2proxy`
//! (`cargo install tun2proxy --version 0.8.3 --locked`, a few minutes). It runs in OUT with dante
//! beside it (both count as the proxy for CPU and memory), makes its TUN interface there, and the
//! interface moves into the applications' namespace.
//!
//! Its settings: MTU 1500 as fastpath's, and `--tcp-mss 1460`. Without that option tun2proxy
//! advertises no MSS to the kernel, which then sends 536-byte segments (its own help says to set it).
//! Everything else is its defaults.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::lwip::{cargo, spawn_in, start_dante};
use super::{which, Namespace, PathUnderTest, TunnelArgs};
use crate::bench::common::outln;

/// The port this row's dante listens on, on OUT's loopback.
const SOCKS_PORT: u16 = 1082;

/// tun2proxy's TUN interface, moved into the applications' namespace.
const DEV: &str = "fpbp0";

/// The version the issue names.
const VERSION: &str = "0.8.3";

/// What the row needs: tun2proxy's binary and dante's server.
pub(super) struct Tun2proxy {
    bin: PathBuf,
    danted: PathBuf,
}

impl Tun2proxy {
    pub(super) fn describe(&self) -> String {
        format!("{} with {}", self.bin.display(), self.danted.display())
    }
}

/// The binary and dante, or why there is no tun2proxy row.
pub(super) fn find(args: &TunnelArgs) -> Result<Tun2proxy, String> {
    let danted = which("danted")
        .or_else(|| Some(PathBuf::from("/usr/sbin/danted")).filter(|p| p.is_file()))
        .ok_or("dante's SOCKS5 server is not installed (Debian: apt-get install dante-server)")?;
    let bin = match &args.tun2proxy {
        Some(p) if p.is_file() => p.clone(),
        Some(p) => return Err(format!("--tun2proxy {}: no such file", p.display())),
        None => {
            let root = PathBuf::from("target/peers/tun2proxy");
            let bin = root.join("bin/tun2proxy-bin");
            if !bin.is_file() {
                if !args.build_tun2proxy {
                    return Err(
                        "tun2proxy is not installed: give --tun2proxy PATH or pass --build-tun2proxy"
                            .into(),
                    );
                }
                install(&root)?;
            }
            bin
        }
    };
    Ok(Tun2proxy { bin, danted })
}

fn install(root: &Path) -> Result<(), String> {
    outln!(
        "installing tun2proxy {VERSION} from crates.io into {} (a few minutes) ...",
        root.display()
    );
    let root = root
        .to_str()
        .ok_or("a target directory that is not UTF-8")?;
    cargo(
        &[
            "install",
            "tun2proxy",
            "--version",
            VERSION,
            "--locked",
            "--quiet",
            "--root",
            root,
        ],
        Path::new("."),
    )?;
    Ok(())
}

/// Starts dante and tun2proxy in OUT and moves tun2proxy's TUN interface into a new applications'
/// namespace.
pub(super) fn path(
    out: &Namespace,
    tag: u32,
    t2p: &Tun2proxy,
    index: u16,
) -> Result<PathUnderTest, String> {
    let app = Namespace::ensure(&format!("fpb-p-{tag}"))?;
    app.ip(&["link", "set", "lo", "up"])?;
    let dir = std::env::temp_dir().join(format!("fpb-tun2proxy-{tag}"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let dante = start_dante(out, &t2p.danted, &dir, SOCKS_PORT)?;
    let mut path = PathUnderTest {
        name: "tun2proxy".into(),
        index,
        app,
        proxy: None,
        helpers: vec![dante],
        tun: Some(DEV),
        scratch: Some(dir),
        no_udp: None,
    };
    let proxy = format!("socks5://127.0.0.1:{SOCKS_PORT}");
    let args: [&OsStr; 10] = [
        "--tun".as_ref(),
        DEV.as_ref(),
        "--proxy".as_ref(),
        proxy.as_ref(),
        "--mtu".as_ref(),
        "1500".as_ref(),
        "--tcp-mss".as_ref(),
        "1460".as_ref(),
        "--verbosity".as_ref(),
        "off".as_ref(),
    ];
    path.proxy = Some(spawn_in(out, &t2p.bin, &args)?);
    path.adopt_tun(out, "tun2proxy", "10.45.0.1/24")?;
    Ok(path)
}
