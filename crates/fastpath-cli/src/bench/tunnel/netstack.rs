//! netstack-smoltcp as a row of `bench tunnel`: the smoltcp-based stack that shadowsocks-rust's and
//! other Rust clients' TUN modes grew from, relaying straight through the kernel's sockets as
//! fastpath's tunnel does (no SOCKS5 server).
//!
//! netstack-smoltcp 0.2.4 is a library; the program that runs it is the crate's own example
//! `forward-offload-linux` (TUN offloads on, through the `tun-rs` crate), built from the package on
//! crates.io. Nothing of it is in this repository: `--build-netstack-smoltcp` fetches the package
//! with cargo, copies it into `target/peers/netstack-smoltcp` and builds the example there (a minute
//! or two), or `--netstack-smoltcp PATH` names a binary built before. It runs in OUT with its
//! outgoing sockets bound to OUT's loopback (`-i lo`, where the server lives), logging only errors,
//! and its TUN interface moves into the applications' namespace.
//!
//! No UDP rows: the example opens a kernel socket and a task for every datagram it relays and never
//! closes them, so an unpaced UDP test would measure that (and run out of descriptors), not the stack.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::lwip::{cargo, spawn_in, write_file};
use super::{Namespace, PathUnderTest, TunnelArgs};
use crate::bench::common::outln;

/// The version the issue names.
const VERSION: &str = "0.2.4";

/// The crate's example that runs it.
const EXAMPLE: &str = "forward-offload-linux";

/// Its TUN interface, moved into the applications' namespace.
const DEV: &str = "fpbn0";

/// Why this row has no UDP figures.
pub(super) const NO_UDP: &str =
    "the example opens a kernel socket and a task for every datagram and never closes them";

/// The example's binary, or why there is no netstack-smoltcp row.
pub(super) fn find(args: &TunnelArgs) -> Result<PathBuf, String> {
    match &args.netstack_smoltcp {
        Some(p) if p.is_file() => Ok(p.clone()),
        Some(p) => Err(format!("--netstack-smoltcp {}: no such file", p.display())),
        None => {
            let root = PathBuf::from("target/peers/netstack-smoltcp");
            let bin = root.join("pkg/target/release/examples").join(EXAMPLE);
            if !bin.is_file() {
                if !args.build_netstack_smoltcp {
                    return Err(
                        "netstack-smoltcp's example is not built: give --netstack-smoltcp \
                                PATH or pass --build-netstack-smoltcp"
                            .into(),
                    );
                }
                build(&root)?;
            }
            Ok(bin)
        }
    }
}

fn build(root: &Path) -> Result<(), String> {
    outln!(
        "building netstack-smoltcp {VERSION}'s example {EXAMPLE} into {} (a minute or two) ...",
        root.display()
    );
    // A manifest that depends on the package, to have cargo fetch it and say where it put it.
    let fetch = root.join("fetch");
    std::fs::create_dir_all(fetch.join("src")).map_err(|e| format!("{}: {e}", fetch.display()))?;
    write_file(
        &fetch.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"fetch\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\nnetstack-smoltcp = \"={VERSION}\"\n\n[workspace]\n"
        ),
    )?;
    write_file(&fetch.join("src/main.rs"), "fn main() {}\n")?;
    let metadata = cargo(&["metadata", "--format-version", "1"], &fetch)?;
    let metadata: serde_json::Value =
        serde_json::from_slice(&metadata).map_err(|e| format!("cargo metadata: {e}"))?;
    let manifest = metadata["packages"]
        .as_array()
        .and_then(|p| {
            p.iter()
                .find(|p| p["name"] == "netstack-smoltcp" && p["version"].as_str() == Some(VERSION))
        })
        .and_then(|p| p["manifest_path"].as_str())
        .ok_or("cargo metadata does not list netstack-smoltcp")?;
    let source = Path::new(manifest)
        .parent()
        .ok_or("netstack-smoltcp's manifest has no directory")?;
    // A copy of its own (the registry's is read-only in spirit), outside fastpath's workspace.
    let pkg = root.join("pkg");
    let _ = std::fs::remove_dir_all(&pkg);
    let status = Command::new("cp")
        .arg("-r")
        .arg(source)
        .arg(&pkg)
        .status()
        .map_err(|e| format!("cp: {e}"))?;
    if !status.success() {
        return Err(format!("copying {} failed", source.display()));
    }
    let manifest = pkg.join("Cargo.toml");
    let text =
        std::fs::read_to_string(&manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
    write_file(
        &manifest,
        &format!("{text}\n# Not a member of fastpath's workspace.\n[workspace]\n"),
    )?;
    cargo(
        &["build", "--release", "--quiet", "--example", EXAMPLE],
        &pkg,
    )?;
    Ok(())
}

/// Starts the example in OUT and moves its TUN interface into a new applications' namespace.
pub(super) fn path(
    out: &Namespace,
    tag: u32,
    bin: &Path,
    index: u16,
) -> Result<PathUnderTest, String> {
    let app = Namespace::ensure(&format!("fpb-n-{tag}"))?;
    app.ip(&["link", "set", "lo", "up"])?;
    let mut path = PathUnderTest {
        name: "netstack-smoltcp".into(),
        index,
        app,
        proxy: None,
        helpers: Vec::new(),
        tun: Some(DEV),
        scratch: None,
        no_udp: Some(NO_UDP),
    };
    let args: Vec<&std::ffi::OsStr> = ["-i", "lo", "-n", DEV, "--log-level", "error"]
        .iter()
        .map(|s| s.as_ref())
        .collect();
    path.proxy = Some(spawn_in(out, bin, &args)?);
    path.adopt_tun(out, "netstack-smoltcp", "10.43.0.1/24")?;
    Ok(path)
}
