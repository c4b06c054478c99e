//! `fastpath bench`: the experiments, one subcommand each.

pub mod common;
pub mod peers;
pub mod udp;

use clap::{Args, Subcommand};

/// Options of `fastpath bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The experiment to run.
    #[command(subcommand)]
    experiment: Experiment,
}

/// The experiments.
#[derive(Subcommand, Debug)]
enum Experiment {
    /// Partridge & Pink's loopback discard experiment: each optimization's worth per datagram.
    Udp(udp::UdpArgs),
    /// One datagram workload through fastpath, smoltcp and the Linux kernel: datagrams/s and ratios.
    Peers(peers::PeersArgs),
}

/// Runs the chosen experiment.
pub fn run(args: &BenchArgs) -> Result<(), String> {
    match &args.experiment {
        Experiment::Udp(a) => udp::run(a),
        Experiment::Peers(a) => peers::run(a),
    }
}
