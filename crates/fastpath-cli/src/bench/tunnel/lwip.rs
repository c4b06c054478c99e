//! lwIP as a row of `bench tunnel`: hev-socks5-tunnel, the lwIP-based tun2socks of several VPN
//! clients, relaying through Debian's dante SOCKS5 server (hev speaks only SOCKS5; dante carries
//! both CONNECT and UDP ASSOCIATE, where microsocks refuses UDP).
//!
//! The `tun2socks` crate (0.1.10 on crates.io) vendors hev-socks5-tunnel and builds it, lwIP
//! included, from its C sources; a program of a few lines written here runs it. Found with `--lwip
//! PATH`, or built before into `target/peers/lwip`, or built now with `--build-lwip` (about ten
//! seconds, needing cargo, make and a C compiler). hev runs in OUT with dante beside it; both count
//! as the proxy for CPU and memory, dante's forked workers included.
//!
//! hev's settings are its defaults (MTU 8500, one queue, 64 KiB TCP buffers): a sweep of its MTU,
//! buffer size and multi-queue flag on this machine found nothing faster.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant as WallClock};

use super::{which, Namespace, PathUnderTest, TunnelArgs};
use crate::bench::common::outln;

/// The wrapper around the crate: runs hev with the configuration file it is given until killed.
const WRAPPER_MAIN: &str = r#"// Written by fastpath's bench tunnel: runs hev-socks5-tunnel (lwIP) from the tun2socks crate.
fn main() {
    let config = std::env::args().nth(1).expect("usage: lwip-tunnel CONFIG.yml");
    if let Err(code) = tun2socks::main_from_file(std::path::Path::new(&config), -1) {
        eprintln!("hev-socks5-tunnel stopped with error {code}");
        std::process::exit(1);
    }
}
"#;

const WRAPPER_MANIFEST: &str = r#"[package]
name = "lwip-tunnel"
version = "0.1.0"
edition = "2021"

[dependencies]
tun2socks = "=0.1.10"

# Not a member of fastpath's workspace.
[workspace]
"#;

/// The port dante listens on, on OUT's loopback.
const SOCKS_PORT: u16 = 1081;

/// lwIP's TUN interface, moved into the applications' namespace.
const DEV: &str = "fpbl0";

/// What the lwIP row needs: the wrapper and dante's server.
pub(super) struct Lwip {
    wrapper: PathBuf,
    danted: PathBuf,
}

impl Lwip {
    pub(super) fn describe(&self) -> String {
        format!("{} with {}", self.wrapper.display(), self.danted.display())
    }
}

/// The wrapper and dante, or why there is no lwIP row.
pub(super) fn find(args: &TunnelArgs) -> Result<Lwip, String> {
    let danted = which("danted")
        .or_else(|| Some(PathBuf::from("/usr/sbin/danted")).filter(|p| p.is_file()))
        .ok_or("dante's SOCKS5 server is not installed (Debian: apt-get install dante-server)")?;
    let wrapper = match &args.lwip {
        Some(p) if p.is_file() => p.clone(),
        Some(p) => return Err(format!("--lwip {}: no such file", p.display())),
        None => {
            let dir = PathBuf::from("target/peers/lwip");
            let bin = dir.join("target/release/lwip-tunnel");
            if !bin.is_file() {
                if !args.build_lwip {
                    return Err(
                        "the lwIP wrapper is not built: give --lwip PATH or pass --build-lwip"
                            .into(),
                    );
                }
                build(&dir)?;
            }
            bin
        }
    };
    Ok(Lwip { wrapper, danted })
}

fn build(dir: &Path) -> Result<(), String> {
    outln!(
        "building hev-socks5-tunnel (lwIP) from the tun2socks crate 0.1.10 into {} ...",
        dir.display()
    );
    std::fs::create_dir_all(dir.join("src")).map_err(|e| format!("{}: {e}", dir.display()))?;
    write_file(&dir.join("Cargo.toml"), WRAPPER_MANIFEST)?;
    write_file(&dir.join("src/main.rs"), WRAPPER_MAIN)?;
    cargo(&["build", "--release", "--quiet"], dir)?;
    Ok(())
}

/// Starts dante and hev in OUT and moves hev's TUN interface into a new applications' namespace.
pub(super) fn path(
    out: &Namespace,
    tag: u32,
    lwip: &Lwip,
    index: u16,
) -> Result<PathUnderTest, String> {
    let app = Namespace::ensure(&format!("fpb-l-{tag}"))?;
    app.ip(&["link", "set", "lo", "up"])?;
    let dir = std::env::temp_dir().join(format!("fpb-lwip-{tag}"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let hev_conf = dir.join("hev.yml");
    std::fs::write(
        &hev_conf,
        format!(
            "tunnel:\n  name: {DEV}\n  mtu: 8500\nsocks5:\n  address: 127.0.0.1\n  port: {SOCKS_PORT}\n  \
             udp: 'udp'\nmisc:\n  log-level: error\n"
        ),
    )
    .map_err(|e| format!("{}: {e}", hev_conf.display()))?;
    let dante = start_dante(out, &lwip.danted, &dir, SOCKS_PORT)?;
    let mut path = PathUnderTest {
        name: "lwIP".into(),
        index,
        app,
        proxy: None,
        helpers: vec![dante],
        tun: Some(DEV),
        scratch: Some(dir.clone()),
        no_udp: None,
    };
    path.proxy = Some(spawn_in(out, &lwip.wrapper, &[hev_conf.as_os_str()])?);
    path.adopt_tun(out, "hev", "10.44.0.1/24")?;
    Ok(path)
}

/// Writes `text` to `path`.
pub(super) fn write_file(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Runs cargo with `args` in `dir` (with its own target directory, whatever the caller's), for a
/// peer built outside fastpath's workspace; returns its standard output.
pub(super) fn cargo(args: &[&str], dir: &Path) -> Result<Vec<u8>, String> {
    let out = Command::new("cargo")
        .args(args)
        .current_dir(dir)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .map_err(|e| format!("running cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out.stdout)
}

/// Starts `program` with `args` in OUT, its output discarded.
pub(super) fn spawn_in(
    out: &Namespace,
    program: &Path,
    args: &[&std::ffi::OsStr],
) -> Result<std::process::Child, String> {
    Command::new("ip")
        .args(["netns", "exec", out.name()])
        .arg(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", program.display()))
}

/// Starts dante in OUT on 127.0.0.1:`port` (CONNECT and UDP ASSOCIATE, no authentication, going out
/// to the server's address), its configuration and log in `dir`, and waits until it listens.
pub(super) fn start_dante(
    out: &Namespace,
    danted: &Path,
    dir: &Path,
    port: u16,
) -> Result<std::process::Child, String> {
    let conf = dir.join("danted.conf");
    std::fs::write(
        &conf,
        format!(
            "logoutput: {log}\n\
             internal: 127.0.0.1 port = {port}\n\
             external: {server}\n\
             clientmethod: none\n\
             socksmethod: none\n\
             user.privileged: root\n\
             user.unprivileged: nobody\n\
             client pass {{ from: 0.0.0.0/0 to: 0.0.0.0/0 }}\n\
             socks pass {{ from: 0.0.0.0/0 to: 0.0.0.0/0 command: connect udpassociate udpreply }}\n",
            log = dir.join("danted.log").display(),
            server = super::SERVER,
        ),
    )
    .map_err(|e| format!("{}: {e}", conf.display()))?;
    let mut dante = spawn_in(out, danted, &[std::ffi::OsStr::new("-f"), conf.as_os_str()])?;
    let listening = wait_for(out, "dante to listen", || {
        Command::new("ip")
            .args(["netns", "exec", out.name(), "ss", "-Hltn"])
            .arg(format!("sport = :{port}"))
            .output()
            .is_ok_and(|o| !o.stdout.is_empty())
    });
    if let Err(e) = listening {
        let _ = dante.kill();
        let _ = dante.wait();
        return Err(e);
    }
    Ok(dante)
}

pub(super) fn wait_for(
    out: &Namespace,
    what: &str,
    ready: impl Fn() -> bool,
) -> Result<(), String> {
    let deadline = WallClock::now() + Duration::from_secs(10);
    while !ready() {
        if WallClock::now() > deadline {
            return Err(format!("timed out waiting for {what} in {}", out.name()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}
