//! `fastpath bench all --report DIR`: every experiment, then `DIR/REPORT.md` with every table, the papers'
//! numbers beside ours, the rows as JSON, and SVG figures in the papers' style, each figure right under
//! its table. `--from-json` renders the report and its figures again from the JSON rows already in
//! `DIR`, measuring nothing.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::common::{self, outln};
use super::figures::{self, Axis, Series};
use super::{checksum, demux, mtu, peers, sweep, udp};

/// Options of `fastpath bench all`.
#[derive(Args, Debug)]
pub struct AllArgs {
    /// Directory for REPORT.md, the figures and the JSON rows (created if missing).
    #[arg(long, default_value = "report")]
    report: PathBuf,
    /// Run every experiment in its short form.
    #[arg(long)]
    quick: bool,
    /// Measure nothing: write REPORT.md and the figures again from the JSON rows already in the
    /// report directory (after a change to the report's layout or figures). A section whose JSON
    /// file is missing is left out; the machine, build and command are those recorded there.
    #[arg(long, conflicts_with = "quick")]
    from_json: bool,
}

/// Where a report's numbers come from, kept beside them in `meta.json`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Provenance {
    machine: String,
    build: String,
    /// The command that measured them.
    command: String,
    /// A `--quick` run.
    quick: bool,
}

/// The file that records the provenance.
const META: &str = "meta.json";

impl Provenance {
    /// What a report directory records: `meta.json`, or else the header of its REPORT.md (reports
    /// written before `meta.json` was), or else nothing known.
    fn recorded(dir: &Path) -> Result<Provenance, String> {
        let meta = dir.join(META);
        if meta.exists() {
            let text = std::fs::read_to_string(&meta)
                .map_err(|e| format!("reading {}: {e}", meta.display()))?;
            return serde_json::from_str(&text)
                .map_err(|e| format!("reading {}: {e}", meta.display()));
        }
        let report = std::fs::read_to_string(dir.join("REPORT.md")).unwrap_or_default();
        Ok(Provenance::from_report(&report))
    }

    /// The header lines of a REPORT.md.
    fn from_report(report: &str) -> Provenance {
        let field = |name: &str| {
            report
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().trim_matches('`').to_string())
                .unwrap_or_else(|| "not recorded".to_string())
        };
        let command = field("command: ");
        Provenance {
            machine: field("machine: "),
            build: field("build: "),
            quick: command.contains(" --quick") || report.contains("This is a `--quick` run"),
            command,
        }
    }
}

/// Every experiment's rows; None for one that is not in the report.
#[derive(Default)]
struct Results {
    udp: Option<Vec<udp::UdpRow>>,
    checksum: Option<Vec<checksum::ChecksumRow>>,
    mtu: Option<Vec<mtu::MtuRow>>,
    sweep: Option<Vec<sweep::SweepRow>>,
    demux: Option<Vec<demux::Cell>>,
    peers: Option<Vec<peers::PeersRow>>,
}

/// The JSON file of each experiment.
const FILES: [&str; 6] = [
    "udp.json",
    "checksum.json",
    "mtu.json",
    "sweep.json",
    "demux.json",
    "peers.json",
];

/// Reads `dir/name`'s rows, if the file is there.
fn load<T: DeserializeOwned>(dir: &Path, name: &str) -> Result<Option<Vec<T>>, String> {
    let path = dir.join(name);
    if !path.exists() {
        return Ok(None);
    }
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| format!("{}: not rows of bench all: {e}", path.display()))
}

impl Results {
    /// The rows in a report directory.
    fn load(dir: &Path) -> Result<Results, String> {
        let r = Results {
            udp: load(dir, FILES[0])?,
            checksum: load(dir, FILES[1])?,
            mtu: load(dir, FILES[2])?,
            sweep: load(dir, FILES[3])?,
            demux: load(dir, FILES[4])?,
            peers: load(dir, FILES[5])?,
        };
        let none = r.udp.is_none()
            && r.checksum.is_none()
            && r.mtu.is_none()
            && r.sweep.is_none()
            && r.demux.is_none()
            && r.peers.is_none();
        if none {
            return Err(format!(
                "--from-json: {} holds none of {}",
                dir.display(),
                FILES.join(", ")
            ));
        }
        Ok(r)
    }
}

/// A markdown table.
fn md_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = format!(
        "| {} |\n|{}\n",
        header.join(" | "),
        " --- |".repeat(header.len())
    );
    for r in rows {
        let _ = writeln!(s, "| {} |", r.join(" | "));
    }
    s
}

/// One series per name: the rows whose `name_of` is that name, as points.
fn series_by<R>(
    names: &[String],
    rows: &[R],
    name_of: impl Fn(&R) -> &str,
    point: impl Fn(&R) -> (f64, f64),
) -> Vec<Series> {
    names
        .iter()
        .map(|n| {
            (
                n.clone(),
                rows.iter()
                    .filter(|r| name_of(r) == n)
                    .map(&point)
                    .collect(),
            )
        })
        .collect()
}

fn f1(x: f64) -> String {
    format!("{x:.1}")
}

/// `fastpath bench all`.
pub fn run(args: &AllArgs) -> Result<(), String> {
    let dir = &args.report;
    if args.from_json {
        if !dir.is_dir() {
            return Err(format!(
                "--from-json: {} is not a report directory",
                dir.display()
            ));
        }
        let provenance = Provenance::recorded(dir)?;
        let results = Results::load(dir)?;
        let path = render(dir, &provenance, &results)?;
        outln!(
            "wrote {} and its figures from the JSON rows beside it",
            path.display()
        );
        return Ok(());
    }
    common::header("bench all: every experiment, and a report");
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let provenance = Provenance {
        machine: common::machine(),
        build: common::build(),
        command: format!(
            "fastpath bench all --report {}{}",
            dir.display(),
            if args.quick { " --quick" } else { "" }
        ),
        quick: args.quick,
    };
    let meta = dir.join(META);
    let text = serde_json::to_string_pretty(&provenance).map_err(|e| e.to_string())? + "\n";
    std::fs::write(&meta, text).map_err(|e| format!("{}: {e}", meta.display()))?;
    let results = measure(dir, args.quick)?;
    let path = render(dir, &provenance, &results)?;
    outln!("\nwrote {}", path.display());
    Ok(())
}

/// Runs every experiment, printing its tables and writing its rows as JSON into `dir` as it goes.
fn measure(dir: &Path, quick: bool) -> Result<Results, String> {
    let json = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let mut r = Results::default();

    outln!("== udp");
    let ua = udp::UdpArgs::for_all(quick);
    let rows = udp::measure(&ua)?;
    udp::print(&rows, ua.sizes());
    common::write_json(&json("udp.json"), &rows)?;
    r.udp = Some(rows);

    outln!("\n== checksum");
    let rows = checksum::measure(&checksum::ChecksumArgs::for_all(quick))?;
    checksum::print(&rows);
    common::write_json(&json("checksum.json"), &rows)?;
    r.checksum = Some(rows);

    outln!("\n== mtu");
    let ma = mtu::MtuArgs::for_all(quick);
    let rows = mtu::measure(&ma)?;
    mtu::print(&rows, ma.mtus());
    common::write_json(&json("mtu.json"), &rows)?;
    r.mtu = Some(rows);

    outln!("\n== sweep");
    let rows = sweep::measure(&sweep::SweepArgs::for_all(quick))?;
    sweep::print(&rows);
    common::write_json(&json("sweep.json"), &rows)?;
    r.sweep = Some(rows);

    outln!("\n== demux");
    let cells = demux::measure_cells(&demux::DemuxBenchArgs::for_all());
    common::write_json(&json("demux.json"), &cells)?;
    r.demux = Some(cells);

    outln!("\n== peers");
    let rows = peers::measure(&peers::PeersArgs::for_all(quick))?;
    peers::print(&rows);
    common::write_json(&json("peers.json"), &rows)?;
    r.peers = Some(rows);
    Ok(r)
}

/// Writes `dir/REPORT.md` and the figures from `results`; returns REPORT.md's path.
fn render(dir: &Path, provenance: &Provenance, results: &Results) -> Result<PathBuf, String> {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# fastpath report\n\nmachine: {}  \nbuild: {}  \ncommand: `{}`\n",
        provenance.machine, provenance.build, provenance.command
    );
    if provenance.quick {
        md += "This is a `--quick` run: few repetitions, for checking that everything runs. Do not quote its figures.\n\n";
    }
    if let Some(rows) = &results.udp {
        md += &udp_section(dir, rows)?;
    }
    if let Some(rows) = &results.checksum {
        md += &checksum_section(dir, rows)?;
    }
    if let Some(rows) = &results.mtu {
        md += &mtu_section(dir, rows)?;
    }
    if let Some(rows) = &results.sweep {
        md += &sweep_section(dir, rows)?;
    }
    if let Some(cells) = &results.demux {
        md += &demux_section(dir, cells)?;
    }
    if let Some(rows) = &results.peers {
        md += &peers_section(rows);
    }
    let path = dir.join("REPORT.md");
    std::fs::write(&path, md).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// The udp section: the table, and a bar chart with a group per configuration and a bar per size.
fn udp_section(dir: &Path, rows: &[udp::UdpRow]) -> Result<String, String> {
    let sizes = common::distinct(rows.iter().map(|r| r.size));
    let configs = common::distinct(rows.iter().map(|r| r.config.clone()));
    let find = |c: &str, s: usize| rows.iter().find(|r| r.config == c && r.size == s);
    let mut md = "## udp: Partridge & Pink's discard experiment (paper 000 §4.2, table 7)\n\nns per datagram (sent with `send_to` and received), median of interleaved rounds; in brackets, times faster than `classic`.\n\n".to_string();
    let size_labels: Vec<String> = sizes.iter().map(|s| format!("{s} B")).collect();
    let mut header = vec!["configuration"];
    header.extend(size_labels.iter().map(String::as_str));
    let table: Vec<Vec<String>> = configs
        .iter()
        .map(|c| {
            std::iter::once(format!("`{c}`"))
                .chain(sizes.iter().map(|&s| {
                    find(c, s).map_or("-".into(), |r| {
                        format!(
                            "{:.1} ({:.2}x)",
                            r.ns_per_datagram, r.improvement_vs_classic
                        )
                    })
                }))
                .collect()
        })
        .collect();
    md += &md_table(&header, &table);
    md += "\n![udp](udp.svg)\n\nThe paper's table 7 (UDP/IP and socket time, initial over optimized): ";
    for (cpu, before, after) in udp::PAPER_TABLE_7 {
        let r: Vec<String> = before
            .iter()
            .zip(after)
            .map(|(b, a)| format!("{:.2}x", b / a))
            .collect();
        let _ = write!(md, "{cpu} {}; ", r.join(", "));
    }
    md += "for 59, 64, 509 and 512 bytes.\n\n";
    let values: Vec<Vec<f64>> = configs
        .iter()
        .map(|c| {
            sizes
                .iter()
                .map(|&s| find(c, s).map_or(0.0, |r| r.ns_per_datagram))
                .collect()
        })
        .collect();
    figures::grouped_bars(
        &dir.join("udp.svg"),
        "ns per datagram by configuration, each adding one optimization to the one before",
        &configs,
        &size_labels,
        &values,
        &Axis::linear("ns per datagram"),
    )?;
    Ok(md)
}

/// The checksum section: the table and a line per routine over the length.
fn checksum_section(dir: &Path, rows: &[checksum::ChecksumRow]) -> Result<String, String> {
    let names = common::distinct(rows.iter().map(|r| r.algorithm.clone()));
    let mut lens = common::distinct(rows.iter().map(|r| r.bytes));
    lens.sort_unstable();
    let mut md = "## checksum: every routine, and the fused copy (paper 000 table 8, paper 001)\n\nGB/s by bytes per call, median of interleaved rounds.\n\n".to_string();
    let labels: Vec<String> = lens
        .iter()
        .map(|&l| figures::bytes_tick(l as f64))
        .collect();
    let mut header = vec!["routine"];
    header.extend(labels.iter().map(String::as_str));
    let table: Vec<Vec<String>> = names
        .iter()
        .map(|n| {
            std::iter::once(format!("`{n}`"))
                .chain(lens.iter().map(|&l| {
                    rows.iter()
                        .find(|r| &r.algorithm == n && r.bytes == l)
                        .map_or("-".into(), |r| format!("{:.2}", r.gbytes_per_s))
                }))
                .collect()
        })
        .collect();
    md += &md_table(&header, &table);
    md += "\n![checksum](checksum.svg)\n\n";
    let find = |n: &str, l: usize| {
        rows.iter()
            .find(|r| r.algorithm == n && r.bytes == l)
            .map(|r| r.ns_per_byte)
    };
    if let (Some(copy), Some(fused)) = (find("memcpy", 16 << 20), find("copy+checksum", 16 << 20)) {
        let _ = writeln!(md, "At 16 MiB (out of cache) the fused copy+checksum takes {:.2}x the time of a copy alone (paper 000 table 8: 1.00x to 1.21x on 1990-93 workstations).\n", fused / copy);
    }
    // The inline IPv4 header checksum has one length: a point, not a line.
    let plotted: Vec<String> = names
        .iter()
        .filter(|n| *n != "ipv4-inline")
        .cloned()
        .collect();
    let series = series_by(
        &plotted,
        rows,
        |r| &r.algorithm,
        |r| (r.bytes as f64, r.gbytes_per_s),
    );
    figures::line_chart(
        &dir.join("checksum.svg"),
        "checksum and copy throughput by length",
        &Axis::log("bytes per call").bytes(),
        &Axis::log("GB/s"),
        &series,
    )?;
    Ok(md)
}

/// The mtu sections, UDP's and TCP's: each a table and a line per option set over the MTU.
fn mtu_section(dir: &Path, rows: &[mtu::MtuRow]) -> Result<String, String> {
    let mut md = String::new();
    for (protocol, svg) in [("udp", "mtu.svg"), ("tcp", "mtu-tcp.svg")] {
        let rows: Vec<mtu::MtuRow> = rows
            .iter()
            .filter(|r| r.protocol == protocol)
            .cloned()
            .collect();
        if rows.is_empty() {
            continue;
        }
        let mut mtus = common::distinct(rows.iter().map(|r| r.mtu));
        mtus.sort_unstable();
        let _ = write!(
            md,
            "## mtu: bulk {} by MTU and data-path optimization (paper 002 figures 2 and 3)\n\nGbit/s of payload between two stacks on the in-memory pair (one thread runs both).\n\n",
            protocol.to_uppercase()
        );
        let ml: Vec<String> = mtus.iter().map(|m| m.to_string()).collect();
        let mut header = vec!["options"];
        header.extend(ml.iter().map(String::as_str));
        let opts = common::distinct(rows.iter().map(|r| r.options.clone()));
        let table: Vec<Vec<String>> = opts
            .iter()
            .map(|o| {
                std::iter::once(format!("`{o}`"))
                    .chain(mtus.iter().map(|m| {
                        rows.iter()
                            .find(|r| &r.options == o && r.mtu == *m)
                            .map_or("-".into(), |r| format!("{:.1}", r.gbit_per_s))
                    }))
                    .collect()
            })
            .collect();
        md += &md_table(&header, &table);
        let _ = write!(md, "\n![mtu {protocol}]({svg})\n\nPaper 002 §4.2: with 1500-byte MTUs TCP never exceeded 740 Mb/s; 8 KB was the sweet spot; zero-copy and checksum offload together reached 2 Gb/s, limited by the NIC.\n\n");
        let series = series_by(
            &opts,
            &rows,
            |r| &r.options,
            |r| (r.mtu as f64, r.gbit_per_s),
        );
        figures::line_chart(
            &dir.join(svg),
            &format!("{} payload bandwidth by MTU", protocol.to_uppercase()),
            &Axis::log("MTU (bytes)")
                .bytes()
                .ticks(mtus.iter().map(|&m| m as f64).collect()),
            &Axis::log("Gbit/s"),
            &series,
        )?;
    }
    Ok(md)
}

/// Message sizes of the sweep's table: the first, every fifth, and the last.
fn sampled<T: Copy>(all: &[T]) -> Vec<T> {
    let mut picked: Vec<T> = all.iter().step_by(5).copied().collect();
    if all.len() % 5 != 1 {
        picked.extend(all.last().copied());
    }
    picked
}

/// The sweep section: time per message by size (a table at some sizes, a figure at all of them,
/// split by operation when instrumented), and the throughput table.
fn sweep_section(dir: &Path, rows: &[sweep::SweepRow]) -> Result<String, String> {
    let mut md = "## sweep: where the time goes, by message size (paper 001 figures 1-10 and table 1, paper 004)\n\n".to_string();
    let per: Vec<&sweep::SweepRow> = rows.iter().filter(|r| r.table == "per-message").collect();
    let side = |s: &str| -> Vec<&sweep::SweepRow> {
        per.iter().filter(|r| r.side == s).copied().collect()
    };
    let (send, receive) = (side("send"), side("receive"));
    let xs: Vec<i64> = send.iter().map(|r| r.size as i64).collect();
    let instrumented = per.iter().any(|r| r.ops_ns.is_some());
    let size_ticks: Vec<f64> = (0..=8).map(|k| f64::from(k) * 1024.0).collect();
    if !send.is_empty() && send.len() == receive.len() {
        md +=
            "ns per message on each side, at some of the sizes (the figures show all of them):\n\n";
        let table: Vec<Vec<String>> = sampled(&(0..send.len()).collect::<Vec<_>>())
            .iter()
            .map(|&i| {
                vec![
                    send[i].size.to_string(),
                    f1(send[i].ns_per_message),
                    f1(receive[i].ns_per_message),
                ]
            })
            .collect();
        md += &md_table(&["size (bytes)", "send", "receive"], &table);
        md += "\n";
        if instrumented {
            for (name, side_rows) in [("send", &send), ("receive", &receive)] {
                let layers: Vec<(String, Vec<f64>)> =
                    ["checksum", "copy", "copy+checksum", "buffers", "other"]
                        .iter()
                        .enumerate()
                        .map(|(k, op)| {
                            (
                                op.to_string(),
                                side_rows
                                    .iter()
                                    .map(|r| r.ops_ns.map_or(0.0, |o| o[k]))
                                    .collect(),
                            )
                        })
                        .collect();
                figures::stacked_chart(
                    &dir.join(format!("sweep-{name}.svg")),
                    &format!("{name} side: ns per message by operation"),
                    &Axis::linear("message size")
                        .bytes()
                        .ticks(size_ticks.clone()),
                    &Axis::linear("ns per message"),
                    &xs,
                    &layers,
                )?;
                let _ = writeln!(md, "![sweep {name}](sweep-{name}.svg)\n");
            }
        } else {
            let layers = [
                (
                    "send".to_string(),
                    send.iter().map(|r| r.ns_per_message).collect(),
                ),
                (
                    "receive".to_string(),
                    receive.iter().map(|r| r.ns_per_message).collect(),
                ),
            ];
            figures::stacked_chart(
                &dir.join("sweep.svg"),
                "ns per message, send and receive (build with --features instrument for the split)",
                &Axis::linear("message size").bytes().ticks(size_ticks),
                &Axis::linear("ns per message"),
                &xs,
                &layers,
            )?;
            md += "![sweep](sweep.svg)\n\nBuilt without the `instrument` feature: no split by operation and layer.\n\n";
        }
    }
    let t: Vec<&sweep::SweepRow> = rows.iter().filter(|r| r.table == "throughput").collect();
    if !t.is_empty() {
        let tab: Vec<Vec<String>> = t
            .iter()
            .map(|r| {
                vec![
                    format!("`{}`", r.checksum),
                    format!("{:.0}", r.mbytes_per_s),
                ]
            })
            .collect();
        md += "One-way throughput of 8192-byte messages (paper 001 table 1: UDP 2.4, 3.2 and 4.1 MB/s):\n\n";
        md += &md_table(&["checksum", "MB/s"], &tab);
        md += "\n";
    }
    Ok(md)
}

/// The demux section: the table and a line per strategy over the socket count.
fn demux_section(dir: &Path, cells: &[demux::Cell]) -> Result<String, String> {
    let mut md = "## demux: lookup cost vs socket count (paper 003)\n\nns per lookup, median of interleaved rounds. For the trace-driven simulation of the paper's tables, run `fastpath demux-sim --synthetic lennon --instructions`.\n\n".to_string();
    let strategies = common::distinct(cells.iter().map(|c| c.strategy.clone()));
    let sockets = common::distinct(cells.iter().map(|c| c.sockets));
    let mut header = vec!["sockets"];
    header.extend(strategies.iter().map(String::as_str));
    let tab: Vec<Vec<String>> = sockets
        .iter()
        .map(|&n| {
            std::iter::once(n.to_string())
                .chain(strategies.iter().map(|s| {
                    cells
                        .iter()
                        .find(|c| c.sockets == n && &c.strategy == s)
                        .map_or("-".into(), |c| f1(c.ns_per_lookup))
                }))
                .collect()
        })
        .collect();
    md += &md_table(&header, &tab);
    md += "\n![demux](demux.svg)\n\n";
    let series = series_by(
        &strategies,
        cells,
        |c| &c.strategy,
        |c| (c.sockets as f64, c.ns_per_lookup),
    );
    figures::line_chart(
        &dir.join("demux.svg"),
        "ns per lookup by bound sockets",
        &Axis::log("bound sockets").ticks(sockets.iter().map(|&n| n as f64).collect()),
        &Axis::log("ns per lookup"),
        &series,
    )?;
    Ok(md)
}

/// The peers section: a table (IPv4's rows, the papers' family).
fn peers_section(rows: &[peers::PeersRow]) -> String {
    let mut md = "## peers: fastpath, smoltcp and the Linux kernel on one workload\n\nMillions of datagrams per second (send_to and receive over loopback, median of interleaved rounds); b1 sends one datagram per poll, b32 a burst of 32; in brackets, fastpath's rate over this stack's.\n\n".to_string();
    let rows: Vec<&peers::PeersRow> = rows.iter().filter(|r| r.family == 4).collect();
    let cols = common::distinct(rows.iter().map(|r| (r.stack.clone(), r.burst)));
    let names: Vec<String> = cols.iter().map(|(s, b)| format!("{s} b{b}")).collect();
    let mut header = vec!["size", "sockets"];
    header.extend(names.iter().map(String::as_str));
    let keys = common::distinct(rows.iter().map(|r| (r.size, r.sockets)));
    let tab: Vec<Vec<String>> = keys
        .iter()
        .map(|&(size, sockets)| {
            [format!("{size} B"), sockets.to_string()]
                .into_iter()
                .chain(cols.iter().map(|(st, b)| {
                    rows.iter()
                        .find(|r| {
                            r.size == size
                                && r.sockets == sockets
                                && &r.stack == st
                                && r.burst == *b
                        })
                        .map_or("-".into(), |r| {
                            format!(
                                "{:.2} ({:.2}x)",
                                r.datagrams_per_s / 1e6,
                                r.ratio_fastpath_over_this
                            )
                        })
                }))
                .collect()
        })
        .collect();
    md += &md_table(&header, &tab);
    md += "\n";
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provenance_of_an_older_report_is_read_from_its_header() {
        let report = "# fastpath report\n\nmachine: AMD EPYC, 2 cores  \nbuild: release build, features: none  \ncommand: `fastpath bench all --report docs/report`\n\n## udp\n";
        let p = Provenance::from_report(report);
        assert_eq!(p.machine, "AMD EPYC, 2 cores");
        assert_eq!(p.build, "release build, features: none");
        assert_eq!(p.command, "fastpath bench all --report docs/report");
        assert!(!p.quick);
        let quick = Provenance::from_report("command: `fastpath bench all --report r --quick`\n");
        assert!(quick.quick);
        assert_eq!(quick.machine, "not recorded");
    }

    #[test]
    fn the_sweep_table_samples_first_every_fifth_and_last() {
        let sizes: Vec<usize> = (0..40).collect();
        assert_eq!(sampled(&sizes), [0, 5, 10, 15, 20, 25, 30, 35, 39]);
        assert_eq!(sampled(&[1, 2, 3, 4, 5, 6]), [1, 6]);
        assert_eq!(sampled(&[1]), [1]);
    }
}
