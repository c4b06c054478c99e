//! `fastpath bench loss`: a bulk TCP transfer between two stacks over the in-memory pair, clean and
//! impaired (loss, duplication, reordering and corruption, each at `--rate` in each direction), with
//! each loss detection (RACK-TLP, the default, and RFC 6675's duplicate-ACK rule): the time against
//! the clean transfer's in the same round, and the sender's counters that show how losses were
//! repaired (RACK's marks and reordering timeouts, tail loss probes, recoveries, retransmission
//! timeouts), and where the time went: the receiver's waits for data by length, which tell the
//! timer that ended each. Rounds interleave the four runs; medians are quoted.

use std::time::Duration;

use clap::Args;
use fastpath::link::{Impairments, LinkCapabilities};
use fastpath::{LossDetection, StackConfig};
use serde::Serialize;

use super::common;
use crate::bench::common::outln;

/// Options of `fastpath bench loss`.
#[derive(Args, Debug)]
pub struct LossArgs {
    /// MiB per transfer [default: 100; with --quick: 8].
    #[arg(long, value_parser = common::count(1, 1 << 20))]
    mib: Option<usize>,
    /// Rounds; the median is quoted [default: 3; with --quick: 1].
    #[arg(long, value_parser = common::count(1, 1000))]
    rounds: Option<usize>,
    /// Probability of each impairment (loss, duplication, reordering, corruption) per packet, in
    /// each direction.
    #[arg(long, default_value_t = 0.01, value_parser = parse_rate)]
    rate: f64,
    /// A short run (one round of 8 MiB) for tests and CI; explicit options win over it.
    #[arg(long)]
    quick: bool,
    /// Write the rows as JSON to this path (`-`: standard output, the tables then go to standard
    /// error). The path is opened before anything is measured.
    #[arg(long)]
    json: Option<String>,
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let r: f64 = s.parse().map_err(|e| format!("{s}: {e}"))?;
    if (0.0..=0.2).contains(&r) {
        Ok(r)
    } else {
        Err(format!("{s}: a probability from 0 to 0.2"))
    }
}

/// One configuration's medians.
#[derive(Clone, Debug, Serialize)]
pub struct LossRow {
    /// `rack` (RACK-TLP with PRR, the default) or `dupack` (RFC 6675, no tail loss probe, no PRR).
    pub detection: String,
    /// The impairments' probability (0: clean).
    pub rate: f64,
    /// MiB transferred.
    pub mib: usize,
    /// Seconds (median).
    pub seconds: f64,
    /// Against the clean transfer with the same detection, in the same rounds (median of the
    /// per-round ratios).
    pub ratio_to_clean: f64,
    /// The sender's counters (medians): segments sent and retransmitted.
    pub segments: f64,
    pub retransmitted: f64,
    /// Recoveries entered before the retransmission timer.
    pub recoveries: f64,
    /// Segments RACK marked lost, and its reordering timer's expiries.
    pub rack_lost: f64,
    pub rack_reorder_timeouts: f64,
    /// Tail loss probes, and those that repaired a loss.
    pub loss_probes: f64,
    pub loss_probe_recoveries: f64,
    /// Retransmission timeouts.
    pub timeouts: f64,
    /// D-SACK blocks the sender received.
    pub dsacks: f64,
    /// Seconds the receiver waited for data, in waits of 1 ms or more: under 10 ms (RACK's
    /// reordering timer, a tail loss probe: both at least 2 ms, as Linux arms them), 10 to 100 ms
    /// (the receiver's 40 ms delayed ACK), 100 ms or more (a retransmission timeout, at least
    /// 200 ms).
    pub wait_short: f64,
    pub wait_delayed_ack: f64,
    pub wait_timeout: f64,
}

/// The sender's counters after one transfer, in [`LossRow`]'s order from `segments`, then the
/// waits.
type Counts = [f64; 12];

/// A bulk transfer of `bytes` from one stack to another over a pair impaired at `rate`.
fn transfer(
    detection: LossDetection,
    rate: f64,
    bytes: u64,
    seed: u64,
) -> Result<(f64, Counts), String> {
    let mut config = StackConfig::default();
    if detection == LossDetection::DupAck {
        config.tcp.loss_detection = LossDetection::DupAck;
        config.tcp.tail_loss_probe = false;
        config.tcp.prr = false;
    }
    let impair = Impairments {
        loss: rate,
        duplicate: rate,
        reorder: rate,
        corrupt: rate,
        seed,
    };
    let caps = LinkCapabilities::plain(1500);
    let limit = Duration::from_secs(600);
    let run = super::tcp::pair_transfer(config, caps, impair, bytes, limit)?;
    let t = &run.sender.counters().tcp;
    let [short, delayed_ack, timeout] = run.waits;
    let counts = [
        t.out_segs as f64,
        t.retrans_segs as f64,
        t.fast_recoveries as f64,
        t.rack_lost as f64,
        t.rack_reorder_timeouts as f64,
        t.loss_probes as f64,
        t.loss_probe_recoveries as f64,
        t.timeouts as f64,
        t.dsacks_received as f64,
        short,
        delayed_ack,
        timeout,
    ];
    Ok((run.seconds, counts))
}

/// Runs the experiment and returns its rows.
pub fn measure(args: &LossArgs) -> Result<Vec<LossRow>, String> {
    let (rounds, mib) = if args.quick { (1, 8) } else { (3, 100) };
    let (rounds, mib) = (args.rounds.unwrap_or(rounds), args.mib.unwrap_or(mib));
    let bytes = (mib as u64) << 20;
    let configs = [
        (LossDetection::Rack, "rack"),
        (LossDetection::DupAck, "dupack"),
    ];
    // Per configuration: clean seconds, impaired seconds and counts, per round.
    let mut clean = vec![Vec::new(); configs.len()];
    let mut impaired: Vec<Vec<(f64, Counts)>> = vec![Vec::new(); configs.len()];
    let bar = common::progress((rounds * configs.len() * 2) as u64, "transfers");
    for round in 0..rounds {
        for (i, &(detection, _)) in configs.iter().enumerate() {
            let seed = round as u64 + 1;
            clean[i].push(transfer(detection, 0.0, bytes, seed)?);
            bar.inc(1);
            impaired[i].push(transfer(detection, args.rate, bytes, seed)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let mut rows = Vec::new();
    for (i, &(_, name)) in configs.iter().enumerate() {
        for (rate, runs) in [(0.0, &clean[i]), (args.rate, &impaired[i])] {
            let seconds: Vec<f64> = runs.iter().map(|r| r.0).collect();
            let ratios: Vec<f64> = runs.iter().zip(&clean[i]).map(|(r, c)| r.0 / c.0).collect();
            let count = |k: usize| common::median(&runs.iter().map(|r| r.1[k]).collect::<Vec<_>>());
            rows.push(LossRow {
                detection: name.to_string(),
                rate,
                mib,
                seconds: common::median(&seconds),
                ratio_to_clean: common::median(&ratios),
                segments: count(0),
                retransmitted: count(1),
                recoveries: count(2),
                rack_lost: count(3),
                rack_reorder_timeouts: count(4),
                loss_probes: count(5),
                loss_probe_recoveries: count(6),
                timeouts: count(7),
                dsacks: count(8),
                wait_short: count(9),
                wait_delayed_ack: count(10),
                wait_timeout: count(11),
            });
        }
    }
    Ok(rows)
}

/// `fastpath bench loss`.
pub fn run(args: &LossArgs) -> Result<(), String> {
    let json = common::JsonOut::open(args.json.as_deref())?;
    let rows = measure(args)?;
    common::header(&format!(
        "TCP bulk over the in-memory pair, clean and impaired ({} of loss, duplication, reordering \
         and corruption each way); {}",
        args.rate,
        common::machine()
    ));
    outln!(
        "{:<8} {:>6} {:>9} {:>8} {:>9} {:>8} {:>7} {:>8} {:>9} {:>6} {:>8} {:>7} {:>9} {:>9} {:>9}",
        "loss",
        "rate",
        "seconds",
        "x clean",
        "segments",
        "resent",
        "recov",
        "rack",
        "reo.tmo",
        "tlp",
        "tlp.rep",
        "rto",
        "w<10ms",
        "w<100ms",
        "w>=100ms"
    );
    for r in &rows {
        outln!(
            "{:<8} {:>6} {:>9.3} {:>8.1} {:>9.0} {:>8.0} {:>7.0} {:>8.0} {:>9.0} {:>6.0} {:>8.0} {:>7.0} {:>9.3} {:>9.3} {:>9.3}",
            r.detection,
            r.rate,
            r.seconds,
            r.ratio_to_clean,
            r.segments,
            r.retransmitted,
            r.recoveries,
            r.rack_lost,
            r.rack_reorder_timeouts,
            r.loss_probes,
            r.loss_probe_recoveries,
            r.timeouts,
            r.wait_short,
            r.wait_delayed_ack,
            r.wait_timeout
        );
    }
    if let Some(json) = json {
        json.write(&rows)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_impaired_transfer_arrives_and_its_repairs_are_counted() {
        let (_, clean) = transfer(LossDetection::Rack, 0.0, 1 << 20, 1).unwrap();
        assert_eq!(clean[1], 0.0, "nothing resent on a clean pair");
        assert_eq!(clean[11], 0.0, "no retransmission timeout waited for");
        let (_, counts) = transfer(LossDetection::Rack, 0.02, 4 << 20, 1).unwrap();
        assert!(counts[1] > 0.0, "losses were repaired: {counts:?}");
        assert!(counts[3] > 0.0, "by RACK: {counts:?}");
        let (seconds, counts) = transfer(LossDetection::DupAck, 0.02, 4 << 20, 1).unwrap();
        assert_eq!(
            (counts[3], counts[5]),
            (0.0, 0.0),
            "no RACK, no probes: {counts:?}"
        );
        assert!(counts[2] > 0.0, "recoveries by duplicate ACKs: {counts:?}");
        assert!(
            counts[9..].iter().sum::<f64>() <= seconds,
            "waits within the transfer: {counts:?} in {seconds} s"
        );
    }
}
