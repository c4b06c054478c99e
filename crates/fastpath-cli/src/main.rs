//! `fastpath`: the command-line front of the fastpath stack.

mod bench;
mod demo;
mod demux_sim;
#[cfg(target_os = "linux")]
mod netns;
#[cfg(target_os = "linux")]
mod pcap_tap;
#[cfg(target_os = "linux")]
mod queues;
#[cfg(target_os = "linux")]
mod serve;
#[cfg(target_os = "linux")]
mod tcp_services;
#[cfg(target_os = "linux")]
mod tunnel;

use clap::{Parser, Subcommand};

/// fastpath: a user-space network stack (UDP, TCP and ICMP over IPv4 and IPv6) that implements and measures the
/// classic end-system fast paths.
#[derive(Parser, Debug)]
#[command(name = "fastpath", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Two stacks on an in-memory link exchange UDP datagrams of every size, verify them, ping, and print
    /// their counters.
    Demo(demo::DemoArgs),
    /// Dixon & Calvert's trace-driven UDP demultiplexing simulation: replay a capture or a synthetic
    /// trace through every demux strategy and report comparisons, time and (optionally) instructions
    /// per lookup.
    DemuxSim(demux_sim::DemuxSimArgs),
    /// Run an experiment: the papers' tables and figures, measured here.
    Bench(bench::BenchArgs),
    /// Be a host on a Linux TUN interface in a network namespace: answer pings (ICMP), serve echo
    /// (RFC 862) and discard (RFC 863) over UDP and TCP and chargen (RFC 864) over TCP for the kernel,
    /// optionally connect to a kernel echo server over TCP, until SIGINT, SIGTERM or --duration.
    #[cfg(target_os = "linux")]
    Serve(serve::ServeArgs),
    /// A transparent proxy ("tun2socks"): the applications in a network namespace reach the network
    /// through a TUN interface, where fastpath terminates every TCP connection and UDP flow and
    /// relays it to its destination through the host kernel's sockets, until SIGINT, SIGTERM or
    /// --duration.
    #[cfg(target_os = "linux")]
    Tunnel(tunnel::TunnelArgs),
}

fn main() {
    // Rust ignores SIGPIPE, so printing into a closed pipe (`fastpath ... | head`) would panic. Take the
    // default back: the program ends quietly when its reader goes away, as Unix filters do. `serve`
    // ignores it again: it has a namespace to clean up, and writes with errors ignored.
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any other thread exists; SIG_DFL is a valid disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::DemuxSim(args) => demux_sim::run(&args),
        Command::Bench(args) => bench::run(&args),
        #[cfg(target_os = "linux")]
        Command::Serve(args) => serve::run(&args),
        #[cfg(target_os = "linux")]
        Command::Tunnel(args) => tunnel::run(&args),
    };
    if let Err(e) = result {
        eprintln!("fastpath: {e}");
        std::process::exit(1);
    }
}
