//! The command line refuses what it cannot do, with a message on standard error and a non-zero exit,
//! instead of spinning, printing `inf`/`NaN` tables or panicking: bad numbers for every experiment,
//! MTUs the stack cannot use, explicit values beside `--quick`, a closed standard output,
//! `demux-sim` without a trace, `serve` addresses that are not host addresses of the prefix.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// What a finished run left behind.
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Run {
    fn explain(&self) -> String {
        format!(
            "exit {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Runs `fastpath args...`; kills it and fails if it takes longer than `limit`.
fn fastpath_within(args: &[&str], limit: Duration) -> Run {
    run_within(Command::new(env!("CARGO_BIN_EXE_fastpath")), args, limit)
}

/// `fastpath` as an unprivileged user: directly when the tests do not run as root, else through
/// `setpriv` as nobody (uid and gid 65534, no groups, no capabilities); None without `setpriv`.
#[cfg(target_os = "linux")]
fn fastpath_unprivileged() -> Option<Command> {
    if !nix::unistd::geteuid().is_root() {
        return Some(Command::new(env!("CARGO_BIN_EXE_fastpath")));
    }
    let found = Command::new("setpriv")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        return None;
    }
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        env!("CARGO_BIN_EXE_fastpath"),
    ]);
    Some(c)
}

/// Runs `command args...`; kills it and fails if it takes longer than `limit`.
fn run_within(mut command: Command, args: &[&str], limit: Duration) -> Run {
    let mut child = command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fastpath");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("fastpath {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Run {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Runs `fastpath args...`, which must be refused at once: non-zero exit, nothing on standard output,
/// and an error naming `mention` on standard error.
fn refused(args: &[&str], mention: &str) {
    refused_run(
        fastpath_within(args, Duration::from_secs(10)),
        args,
        mention,
    );
}

/// Checks that `run` (of `fastpath args...`) was refused: non-zero exit, nothing on standard output,
/// and an error naming `mention` on standard error.
fn refused_run(run: Run, args: &[&str], mention: &str) {
    assert!(
        !run.status.success(),
        "fastpath {args:?} was accepted:\n{}",
        run.explain()
    );
    assert_ne!(run.status.code(), Some(101), "{}", run.explain());
    assert!(
        !run.stderr.contains("panicked"),
        "fastpath {args:?} panicked:\n{}",
        run.explain()
    );
    assert!(
        run.stderr.contains(mention),
        "fastpath {args:?}: stderr does not mention `{mention}`:\n{}",
        run.explain()
    );
    assert!(
        run.stdout.trim().is_empty(),
        "fastpath {args:?} printed before refusing:\n{}",
        run.explain()
    );
}

#[test]
fn mtus_the_stack_cannot_use_are_refused() {
    for bad in ["10", "67", "575", "65536", "0"] {
        refused(
            &["bench", "tcp", "--pair-only", "--quick", "--mtus", bad],
            "--mtus",
        );
        refused(&["bench", "mtu", "--quick", "--mtus", bad], "--mtus");
        refused(&["bench", "sweep", "--quick", "--mtu", bad], "--mtu");
    }
    // One bad value in a list is enough.
    refused(
        &["bench", "tcp", "--pair-only", "--mtus", "1500,10,9000"],
        "--mtus",
    );
    // The message says what is allowed.
    let run = fastpath_within(
        &["bench", "tcp", "--pair-only", "--mtus", "10"],
        Duration::from_secs(10),
    );
    assert!(run.stderr.contains("576"), "{}", run.explain());
}

#[test]
fn zero_and_out_of_range_counts_are_refused() {
    let cases: &[(&[&str], &str)] = &[
        (&["bench", "udp", "--datagrams", "0"], "--datagrams"),
        (&["bench", "udp", "--rounds", "0"], "--rounds"),
        (&["bench", "udp", "--burst", "0"], "--burst"),
        (&["bench", "udp", "--sizes", "64,0"], "--sizes"),
        (&["bench", "udp", "--sizes", "65508"], "--sizes"),
        (&["bench", "checksum", "--rounds", "0"], "--rounds"),
        (&["bench", "mtu", "--mib", "0"], "--mib"),
        (&["bench", "mtu", "--rounds", "0"], "--rounds"),
        (&["bench", "mtu", "--protocols", "sctp"], "--protocols"),
        (&["bench", "sweep", "--round-trips", "0"], "--round-trips"),
        (&["bench", "sweep", "--rounds", "0"], "--rounds"),
        (&["bench", "demux", "--sockets", "0"], "--sockets"),
        (&["bench", "demux", "--rounds", "0"], "--rounds"),
        (&["bench", "demux", "--round-ms", "0"], "--round-ms"),
        (&["bench", "demux", "--round-ms", "NaN"], "--round-ms"),
        (&["bench", "peers", "--datagrams", "0"], "--datagrams"),
        (
            &["bench", "peers", "--linux-datagrams", "0"],
            "--linux-datagrams",
        ),
        (&["bench", "peers", "--rounds", "0"], "--rounds"),
        (&["bench", "peers", "--sizes", "1473"], "--sizes"),
        (&["bench", "peers", "--sizes", "0"], "--sizes"),
        (&["bench", "peers", "--sockets", "1"], "--sockets"),
        (&["bench", "peers", "--burst", "0"], "--burst"),
        (
            &["bench", "tcp", "--pair-only", "--rounds", "0"],
            "--rounds",
        ),
        (&["bench", "tcp", "--pair-only", "--mib", "0"], "--mib"),
        (
            &["bench", "tcp", "--pair-only", "--seconds", "0"],
            "--seconds",
        ),
        (
            &["bench", "tcp", "--pair-only", "--seconds", "inf"],
            "--seconds",
        ),
        (&["demo", "--mtu", "67"], "--mtu"),
        (
            &["demux-sim", "--synthetic", "gaia", "--runs", "0"],
            "--runs",
        ),
    ];
    for (args, mention) in cases {
        refused(args, mention);
    }
    #[cfg(target_os = "linux")]
    for (args, mention) in [
        (&["bench", "tun", "--rounds", "0"][..], "--rounds"),
        (&["bench", "tun", "--seconds=-1"], "--seconds"),
        (&["bench", "tun", "--sizes", "0"], "--sizes"),
        (&["bench", "tun", "--sizes", "1473"], "--sizes"),
        (&["bench", "tun", "--window", "0"], "--window"),
        (&["serve", "--duration=-1"], "--duration"),
        (&["serve", "--connect-delay", "NaN"], "--connect-delay"),
        (&["serve", "--queues", "0"], "--queues"),
        (&["serve", "--queues", "257"], "--queues"),
        (
            &["serve", "--queues", "2", "--pcap", "/tmp/never.pcap"],
            "--pcap",
        ),
        (&["bench", "tun", "--queues", "0"], "--queues"),
        (&["bench", "tun", "--senders", "0"], "--senders"),
        (
            &["bench", "tcp", "--pair-only", "--queues", "0"],
            "--queues",
        ),
        (
            &["bench", "tcp", "--pair-only", "--streams", "0"],
            "--streams",
        ),
    ] {
        refused(args, mention);
    }
}

#[test]
fn explicit_values_win_over_quick() {
    // bench udp: --quick alone would send 20,000 datagrams per run.
    let run = fastpath_within(
        &[
            "bench",
            "udp",
            "--quick",
            "--datagrams",
            "1000",
            "--rounds",
            "1",
            "--sizes",
            "64",
        ],
        Duration::from_secs(60),
    );
    assert!(run.status.success(), "{}", run.explain());
    assert!(
        run.stdout.contains("1000 datagrams per run"),
        "{}",
        run.explain()
    );
    // bench demux: --quick alone would measure 1, 64 and 1024 sockets over 3 rounds.
    let run = fastpath_within(
        &[
            "bench",
            "demux",
            "--quick",
            "--sockets",
            "16",
            "--rounds",
            "2",
            "--json",
            "-",
        ],
        Duration::from_secs(60),
    );
    assert!(run.status.success(), "{}", run.explain());
    let cells: Vec<Value> = serde_json::from_str(&run.stdout).expect("JSON cells");
    assert!(!cells.is_empty());
    for cell in &cells {
        assert_eq!(cell["sockets"], 16, "{cell}");
        assert_eq!(cell["rounds"], 2, "{cell}");
    }
    // bench peers: --quick alone would send a twentieth of --datagrams.
    let run = fastpath_within(
        &[
            "bench",
            "peers",
            "--quick",
            "--datagrams",
            "3000",
            "--linux-datagrams",
            "500",
            "--rounds",
            "1",
            "--sizes",
            "64",
            "--sockets",
            "2",
            "--json",
            "-",
        ],
        Duration::from_secs(60),
    );
    assert!(run.status.success(), "{}", run.explain());
    let rows: Vec<Value> = serde_json::from_str(&run.stdout).expect("JSON rows alone");
    let fastpath: Vec<&Value> = rows.iter().filter(|r| r["stack"] == "fastpath").collect();
    assert!(!fastpath.is_empty(), "{}", run.explain());
    for r in fastpath {
        assert_eq!(r["sent"], 3000, "{r}");
    }
}

#[test]
fn quick_is_documented_as_a_default_only() {
    let mut benches = vec!["udp", "checksum", "mtu", "sweep", "demux", "peers", "tcp"];
    if cfg!(target_os = "linux") {
        benches.push("tun");
    }
    for bench in benches {
        let run = fastpath_within(&["bench", bench, "--help"], Duration::from_secs(10));
        assert!(run.status.success(), "{}", run.explain());
        assert!(
            run.stdout.contains("explicit options win over it"),
            "bench {bench} --help:\n{}",
            run.explain()
        );
    }
}

#[test]
fn a_closed_standard_output_ends_the_program_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(["bench", "checksum", "--quick"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fastpath");
    // Read one line, as `head -1` would, then close the pipe.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .expect("read a line");
    assert!(first.starts_with("bench checksum"), "{first}");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().expect("wait");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_ne!(status.code(), Some(101), "{stderr}");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        // Quietly: success, or killed by SIGPIPE (13) as `head` expects of its writers.
        assert!(
            status.success() || status.signal() == Some(13),
            "{status}: {stderr}"
        );
    }
}

#[test]
fn demux_sim_without_a_trace_names_both_sources() {
    let run = fastpath_within(&["demux-sim"], Duration::from_secs(10));
    assert!(!run.status.success(), "{}", run.explain());
    assert!(run.stderr.contains("--synthetic"), "{}", run.explain());
    assert!(run.stderr.contains("--trace"), "{}", run.explain());
}

#[test]
fn help_describes_udp_tcp_and_icmp() {
    let mut helps = vec![vec!["--help"], vec!["bench", "mtu", "--help"]];
    if cfg!(target_os = "linux") {
        helps.push(vec!["serve", "--help"]);
    }
    for args in helps {
        let run = fastpath_within(&args, Duration::from_secs(10));
        assert!(run.status.success(), "{}", run.explain());
        assert!(!run.stdout.contains("UDP/IPv4 stack"), "{}", run.explain());
        assert!(run.stdout.contains("TCP"), "{args:?}:\n{}", run.explain());
    }
    let top = fastpath_within(&["--help"], Duration::from_secs(10)).stdout;
    assert!(
        top.contains("UDP, TCP and ICMP over IPv4 and IPv6"),
        "the top-level help: {top}"
    );
}

/// `tunnel --help` says what `--socks5` does with `--socks5-user`, and where the applications'
/// resolver comes from, beside the options themselves.
#[cfg(target_os = "linux")]
#[test]
fn tunnel_help_says_how_to_authenticate_and_resolve() {
    let run = fastpath_within(&["tunnel", "--help"], Duration::from_secs(10));
    assert!(run.status.success(), "{}", run.explain());
    let help = run.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains("no authentication unless --socks5-user"),
        "{help}"
    );
    assert!(!help.contains("RFC 1928, no authentication)"), "{help}");
    assert!(help.contains("/etc/netns/NAME/resolv.conf"), "{help}");
    // Routes by destination and HTTP proxies, and what becomes of UDP routed to one.
    assert!(help.contains("--route <MATCH=UPSTREAM>"), "{help}");
    assert!(help.contains("http://[USER@]IP:PORT"), "{help}");
    assert!(
        help.contains("UDP flows routed to one are dropped"),
        "{help}"
    );
}

/// Removes the namespace (and the program's record of it) should a `serve` or `tunnel` that ought
/// to have refused create it.
#[cfg(target_os = "linux")]
struct Cleanup(&'static str);

#[cfg(target_os = "linux")]
impl Drop for Cleanup {
    fn drop(&mut self) {
        if std::path::Path::new("/var/run/netns").join(self.0).exists() {
            let _ = Command::new("ip").args(["netns", "del", self.0]).status();
        }
        let _ = std::fs::remove_file(std::path::Path::new("/run/fastpath/netns").join(self.0));
    }
}

/// `serve` addresses that are not a host of the prefix are refused before anything is created.
#[cfg(target_os = "linux")]
#[test]
fn serve_refuses_addresses_that_are_not_hosts_of_the_prefix() {
    let netns = "fp-test-cli-errors-addr";
    let _cleanup = Cleanup(netns);
    let serve = |kernel: &str, addr: &str, mention: &str| {
        refused(
            &[
                "serve",
                "--netns",
                netns,
                "--tun",
                "fpt9",
                "--duration",
                "1",
                "--kernel-addr",
                kernel,
                "--addr",
                addr,
            ],
            mention,
        );
    };
    serve("10.7.0.1/24", "10.7.0.0", "network address");
    serve("10.7.0.1/24", "10.7.0.255", "broadcast address");
    serve("10.7.0.1/24", "10.8.0.2", "outside");
    serve("10.7.0.1/24", "10.7.0.1", "--kernel-addr");
    serve("10.7.0.0/24", "10.7.0.2", "network address");
    serve("10.7.0.9/29", "10.7.0.15", "broadcast address");
}

/// A `--json` path that cannot be written is refused before anything is measured (each of these
/// runs for minutes when it measures), naming the option and the path.
#[test]
fn an_unwritable_json_path_is_refused_before_measuring() {
    let path = "/nonexistent-dir/x.json";
    let mut cases: Vec<Vec<&str>> = vec![
        vec!["bench", "udp"],
        vec!["bench", "checksum"],
        vec!["bench", "mtu"],
        vec!["bench", "sweep"],
        vec!["bench", "demux"],
        vec!["bench", "peers"],
        vec!["bench", "tcp", "--pair-only"],
        vec!["demux-sim", "--synthetic", "lennon"],
    ];
    if cfg!(target_os = "linux") {
        cases.push(vec!["bench", "tun"]);
    }
    for mut args in cases {
        args.extend(["--json", path]);
        let started = Instant::now();
        refused(&args, &format!("--json {path}"));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "fastpath {args:?} took {:?} to refuse",
            started.elapsed()
        );
    }
    // A directory is no file either.
    let dir = std::env::temp_dir();
    let dir = dir.to_str().unwrap();
    refused(&["bench", "udp", "--json", dir], "--json");
}

/// `tunnel` options that cannot work are refused before anything is created or needs root (the
/// same checks, as an unprivileged user, name the option rather than root): a fake DNS range over
/// the link's own prefix (its answers would be the kernel's and fastpath's addresses), an
/// interface that does not exist, no time to connect, no flows, a route or a proxy that does not
/// parse.
#[cfg(target_os = "linux")]
#[test]
fn tunnel_refuses_options_that_cannot_work_before_starting() {
    let netns = "fp-test-cli-errors-tunnel";
    let _cleanup = Cleanup(netns);
    let cases: &[(&[&str], &str)] = &[
        (
            &["--fake-dns", "10.66.0.0/16"],
            "--fake-dns 10.66.0.0/16 overlaps",
        ),
        (
            &["--fake-dns", "10.66.0.128/25"],
            "--fake-dns 10.66.0.128/25 overlaps",
        ),
        (
            &[
                "--kernel-addr",
                "198.18.0.1/24",
                "--addr",
                "198.18.0.2",
                "--fake-dns",
                "198.18.0.0/15",
            ],
            "--fake-dns",
        ),
        (
            &["--bind-interface", "nosuchif0"],
            "--bind-interface nosuchif0",
        ),
        (&["--connect-timeout", "0"], "--connect-timeout"),
        (&["--max-udp-flows", "0"], "--max-udp-flows"),
        (&["--max-tcp-flows", "0"], "--max-tcp-flows"),
        (
            &["--route", "10.0.0.0/8"],
            "--route `10.0.0.0/8` is not a rule",
        ),
        (
            &["--route", "example.com=gopher://192.0.2.1:70"],
            "scheme `gopher` not supported",
        ),
        (&["--proxy", "http://proxy.example:3128"], "--proxy"),
    ];
    for (options, mention) in cases {
        let mut args = vec![
            "tunnel",
            "--netns",
            netns,
            "--tun",
            "fpt8",
            "--duration",
            "1",
        ];
        args.extend_from_slice(options);
        refused(&args, mention);
        if let Some(unprivileged) = fastpath_unprivileged() {
            let run = run_within(unprivileged, &args, Duration::from_secs(10));
            refused_run(run, &args, mention);
        }
    }
    assert!(
        !std::path::Path::new("/var/run/netns").join(netns).exists(),
        "a refused tunnel created its namespace"
    );
}

/// `serve` and `tunnel` without root say plainly what they need, before they try anything (they
/// used to fail on a permission denied writing under /run).
#[cfg(target_os = "linux")]
#[test]
fn serve_and_tunnel_say_they_need_root() {
    let Some(_) = fastpath_unprivileged() else {
        eprintln!("serve_and_tunnel_say_they_need_root: no setpriv to drop root with: skipped");
        return;
    };
    let netns = "fp-test-cli-errors-root";
    let _cleanup = Cleanup(netns);
    for command in ["serve", "tunnel"] {
        let args = [command, "--netns", netns, "--duration", "1"];
        let run = run_within(
            fastpath_unprivileged().unwrap(),
            &args,
            Duration::from_secs(10),
        );
        refused_run(
            run,
            &args,
            &format!("{command} needs root, /dev/net/tun and ip(8)"),
        );
        let run = run_within(
            fastpath_unprivileged().unwrap(),
            &args,
            Duration::from_secs(10),
        );
        assert!(
            run.stderr.contains("not running as root"),
            "{}",
            run.explain()
        );
        assert!(
            !run.stderr.contains("Permission denied"),
            "{}",
            run.explain()
        );
    }
}
