//! `fastpath bench`: the experiments, one subcommand each.

pub mod all;
#[cfg(target_os = "linux")]
pub mod ceiling;
pub mod checksum;
pub mod common;
pub mod demux;
pub mod figures;
pub mod loss;
pub mod mtu;
pub mod peers;
pub mod sweep;
pub mod tcp;
#[cfg(target_os = "linux")]
pub mod tun;
#[cfg(target_os = "linux")]
pub mod tunnel;
pub mod udp;
#[cfg(target_os = "linux")]
pub mod xdp;

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
    /// Every checksum routine in GB/s, and the fused copy+checksum against a copy alone.
    Checksum(checksum::ChecksumArgs),
    /// Bulk UDP and TCP by MTU with and without fusing, offload and zero copy.
    Mtu(mtu::MtuArgs),
    /// TCP bulk over the in-memory pair clean and impaired (loss, duplication, reordering,
    /// corruption), RACK-TLP against RFC 6675: time against the clean transfer, and how losses
    /// were repaired.
    Loss(loss::LossArgs),
    /// Request/response over 40 message sizes: time by operation and by layer, and checksum throughput.
    Sweep(sweep::SweepArgs),
    /// Lookup time of every demultiplexing strategy as the number of bound sockets grows.
    Demux(demux::DemuxBenchArgs),
    /// Every experiment, then a report (REPORT.md, SVG figures, JSON rows) in a directory.
    All(all::AllArgs),
    /// One datagram workload through fastpath, smoltcp and the Linux kernel: datagrams/s and ratios.
    Peers(peers::PeersArgs),
    /// A kernel UDP client against fastpath over a TUN interface (offload and batching on and off), and
    /// against the kernel itself over veth: datagrams/s, Gbit/s, ratios. Needs root.
    #[cfg(target_os = "linux")]
    Tun(tun::TunArgs),
    /// TCP bulk throughput and request/response: fastpath over the in-memory pair by MTU and
    /// option, and a kernel client against fastpath and smoltcp over TUN and the kernel over veth.
    Tcp(tcp::TcpArgs),
    /// iperf3 through `fastpath tunnel` and gVisor's tun2socks, beside the kernel's own routing:
    /// TCP and UDP throughput, connections/s, CPU per GB and memory per idle connection. Needs root
    /// and iperf3.
    #[cfg(target_os = "linux")]
    Tunnel(tunnel::TunnelArgs),
    /// A kernel UDP sender against fastpath on AF_XDP and on TUN, the kernel over veth, and an
    /// AF_XDP reader with no stack: CPU per datagram in the server and on the machine (root).
    #[cfg(target_os = "linux")]
    Xdp(xdp::XdpArgs),
}

/// Runs the chosen experiment.
pub fn run(args: &BenchArgs) -> Result<(), String> {
    match &args.experiment {
        Experiment::Udp(a) => udp::run(a),
        Experiment::Checksum(a) => checksum::run(a),
        Experiment::Mtu(a) => mtu::run(a),
        Experiment::Loss(a) => loss::run(a),
        Experiment::Sweep(a) => sweep::run(a),
        Experiment::Demux(a) => demux::run(a),
        Experiment::All(a) => all::run(a),
        Experiment::Peers(a) => peers::run(a),
        #[cfg(target_os = "linux")]
        Experiment::Tun(a) => tun::run(a),
        Experiment::Tcp(a) => tcp::run(a),
        #[cfg(target_os = "linux")]
        Experiment::Tunnel(a) => tunnel::run(a),
        #[cfg(target_os = "linux")]
        Experiment::Xdp(a) => xdp::run(a),
    }
}
