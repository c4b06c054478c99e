//! The C API from C: compiles `tests/c/tunnel_echo.c` with the system's C compiler against the
//! committed header and the shared library this crate builds, and runs it in a namespace of its own
//! (the "network", an address on its loopback with the echo server) with a second one for the
//! applications, into which the program moves the TUN interface it opened itself. The program checks
//! the echo, the statistics and the error reporting (see its comment).
//!
//! Needs root, `/dev/net/tun`, `ip` and a C compiler (`cc`); without them it prints why and passes,
//! unless `FASTPATH_REQUIRE_TUN=1` (CI sets it), when it fails. The namespaces are removed on the way
//! out, also when the test fails.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether the test can run here; else says why (or fails, with `FASTPATH_REQUIRE_TUN=1`).
fn environment_ok(test: &str) -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|u| u.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false);
    let tun = Path::new("/dev/net/tun").exists();
    let ip = Command::new("ip").arg("-V").output().is_ok();
    let cc = Command::new("cc").arg("--version").output().is_ok();
    let missing: Vec<&str> = [
        (root, "root"),
        (tun, "/dev/net/tun"),
        (ip, "ip(8)"),
        (cc, "cc"),
    ]
    .iter()
    .filter(|(ok, _)| !ok)
    .map(|&(_, what)| what)
    .collect();
    if missing.is_empty() {
        return true;
    }
    let why = format!("{test}: needs {}", missing.join(", "));
    if std::env::var("FASTPATH_REQUIRE_TUN").as_deref() == Ok("1") {
        panic!("{why} (FASTPATH_REQUIRE_TUN=1)");
    }
    eprintln!("skipping {why}");
    false
}

/// A network namespace made for the test, removed on drop.
struct Netns(String);

impl Netns {
    fn create(role: &str) -> Netns {
        let name = format!("fp-ffi-{role}-{}", std::process::id());
        // One a killed run left behind (quietly: usually there is none).
        let _ = Command::new("ip")
            .args(["netns", "del", &name])
            .stderr(std::process::Stdio::null())
            .status();
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip netns add {name}");
        Netns(name)
    }

    fn ip(&self, args: &[&str]) {
        let ok = Command::new("ip")
            .args(["-n", &self.0])
            .args(args)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip -n {} {args:?}", self.0);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// The directory of the shared library this test run built: beside the test itself
/// (`target/PROFILE/deps/`), where cargo leaves it for tests (the copy one level up is the last
/// `cargo build`'s, which may be older).
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().to_path_buf()
}

#[test]
fn a_c_program_runs_the_tunnel_on_a_tun_descriptor_it_opened() {
    if !environment_ok("a_c_program_runs_the_tunnel_on_a_tun_descriptor_it_opened") {
        return;
    }
    let lib = library_dir();
    assert!(
        lib.join("libfastpath_tunnel_ffi.so").exists(),
        "no libfastpath_tunnel_ffi.so in {}",
        lib.display()
    );
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let program = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tunnel_echo");
    let compiled = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-o"])
        .arg(&program)
        .arg(crate_dir.join("tests/c/tunnel_echo.c"))
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lfastpath_tunnel_ffi", "-lpthread"])
        .status()
        .expect("cc");
    assert!(compiled.success(), "compiling tests/c/tunnel_echo.c");

    let net = Netns::create("net");
    let app = Netns::create("app");
    net.ip(&["link", "set", "lo", "up"]);
    net.ip(&["addr", "add", "10.78.0.2/32", "dev", "lo"]);
    let ifname = format!("fpffi{}", std::process::id() % 10000);
    let out = Command::new("ip")
        .args(["netns", "exec", &net.0])
        .arg(&program)
        .args([app.0.as_str(), ifname.as_str(), "10.78.0.2"])
        // Cargo's own search path for tests names `target/PROFILE` first, where an older `cargo
        // build` may have left another copy of the library, and it overrides the program's
        // run path: this run's library only.
        .env("LD_LIBRARY_PATH", &lib)
        .output()
        .expect("running tunnel_echo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}{stderr}");
    assert!(out.status.success(), "tunnel_echo failed: {stderr}");
    assert!(
        stdout.contains("echoed 4194304 bytes through the tunnel"),
        "{stdout}"
    );
    assert!(stdout.lines().any(|l| l == "ok"), "{stdout}");
    // The interface went with the descriptor.
    let links = Command::new("ip")
        .args(["-n", &app.0, "link", "show"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&links.stdout).contains(&ifname),
        "the TUN interface outlived the tunnel"
    );
}
