//! `fastpath bench`: micro-benchmarks of the stack's fast paths, one subcommand per experiment.

pub mod demux;

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
    /// Lookup time of every demultiplexing strategy as the number of bound sockets grows.
    Demux(demux::DemuxBenchArgs),
}

/// Runs the chosen experiment.
pub fn run(args: &BenchArgs) -> Result<(), String> {
    match &args.experiment {
        Experiment::Demux(a) => demux::run(a),
    }
}
