//! `fastpath`: the command-line front of the fastpath stack.

mod bench;
mod demo;
mod demux_sim;
#[cfg(target_os = "linux")]
mod netns;
#[cfg(target_os = "linux")]
mod pcap_tap;
#[cfg(target_os = "linux")]
mod serve;
#[cfg(target_os = "linux")]
#[cfg(target_os = "linux")]
mod tcp_services;

use clap::{Parser, Subcommand};

/// fastpath: a user-space UDP/IPv4 stack that implements and measures the classic end-system fast paths.
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
    /// Be a host on a Linux TUN interface in a network namespace: answer pings, echo (RFC 862) and
    /// discard (RFC 863) UDP for the kernel, until SIGINT, SIGTERM or --duration.
    #[cfg(target_os = "linux")]
    Serve(serve::ServeArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::DemuxSim(args) => demux_sim::run(&args),
        Command::Bench(args) => bench::run(&args),
        #[cfg(target_os = "linux")]
        Command::Serve(args) => serve::run(&args),
    };
    if let Err(e) = result {
        eprintln!("fastpath: {e}");
        std::process::exit(1);
    }
}
