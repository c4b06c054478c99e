//! `fastpath bench all --report DIR`: every experiment, then `DIR/REPORT.md` with every table, the papers'
//! numbers beside ours, the rows as JSON, and SVG figures in the papers' style.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;

use super::{checksum, common, demux, mtu, peers, sweep, udp};

/// Options of `fastpath bench all`.
#[derive(Args, Debug)]
pub struct AllArgs {
    /// Directory for REPORT.md, the figures and the JSON rows (created if missing).
    #[arg(long, default_value = "report")]
    report: PathBuf,
    /// Run every experiment in its short form.
    #[arg(long)]
    quick: bool,
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

fn palette(i: usize) -> RGBColor {
    const C: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    C[i % C.len()]
}

type Series = (String, Vec<(f64, f64)>);

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

/// Draws `series` as lines, with axis labels and a legend, into `chart`.
fn draw_lines<'a, 'b: 'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, Y>>,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
) -> Result<(), String>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let e = |x: &dyn std::fmt::Display| format!("drawing a figure: {x}");
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(|x| e(&x))?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = palette(i);
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(|x| e(&x))
}

/// A line chart with a logarithmic x axis (and y, if `log_y`) into `path`.
fn line_chart(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    log_y: bool,
) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let pts = series.iter().flat_map(|(_, p)| p.iter());
    let (x0, x1) = pts
        .clone()
        .fold((f64::MAX, f64::MIN), |(a, b), &(x, _)| (a.min(x), b.max(x)));
    let (y0, y1) = pts.fold((f64::MAX, f64::MIN), |(a, b), &(_, y)| (a.min(y), b.max(y)));
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60);
    let xr = (x0.max(1e-9)..x1 * 1.05).log_scale();
    if log_y {
        let mut chart = builder
            .build_cartesian_2d(xr, (y0.max(1e-9) * 0.8..y1 * 1.25).log_scale())
            .map_err(|x| e(&x))?;
        draw_lines(&mut chart, x_desc, y_desc, series)?;
    } else {
        let mut chart = builder
            .build_cartesian_2d(xr, 0.0..y1 * 1.1)
            .map_err(|x| e(&x))?;
        draw_lines(&mut chart, x_desc, y_desc, series)?;
    }
    root.present().map_err(|x| e(&x))
}

/// A stacked area chart (linear axes): `layers` are stacked bottom up.
fn stacked_chart(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    xs: &[f64],
    layers: &[(String, Vec<f64>)],
) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let totals: Vec<f64> = (0..xs.len())
        .map(|i| layers.iter().map(|(_, v)| v[i]).sum())
        .collect();
    let ymax = totals.iter().cloned().fold(0.0, f64::max) * 1.1;
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..xs.last().copied().unwrap_or(1.0), 0.0..ymax.max(1e-9))
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(|x| e(&x))?;
    // Draw the cumulative tops from the highest down, so each band shows.
    for k in (0..layers.len()).rev() {
        let color = palette(k);
        let top: Vec<(f64, f64)> = xs
            .iter()
            .enumerate()
            .map(|(i, &x)| (x, layers[..=k].iter().map(|(_, v)| v[i]).sum()))
            .collect();
        chart
            .draw_series(AreaSeries::new(top, 0.0, color.mix(0.85)).border_style(color))
            .map_err(|x| e(&x))?
            .label(layers[k].0.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))
}

fn f1(x: f64) -> String {
    format!("{x:.1}")
}

/// `fastpath bench all`.
pub fn run(args: &AllArgs) -> Result<(), String> {
    common::header("bench all: every experiment, and a report");
    let dir = &args.report;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let json = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let mut md = String::new();
    let _ = writeln!(md, "# fastpath report\n\nmachine: {}  \nbuild: {}  \ncommand: `fastpath bench all --report {}{}`\n", common::machine(), common::build(), dir.display(), if args.quick { " --quick" } else { "" });
    if args.quick {
        md += "This is a `--quick` run: few repetitions, for checking that everything runs. Do not quote its figures.\n\n";
    }

    // udp
    println!("== udp");
    let ua = udp::UdpArgs::for_all(args.quick);
    let rows = udp::measure(&ua)?;
    udp::print(&rows, ua.sizes());
    common::write_json(&json("udp.json"), &rows)?;
    md += "## udp: Partridge & Pink's discard experiment (paper 000 §4.2, table 7)\n\nns per datagram (sent with `send_to` and received), median of interleaved rounds; in brackets, times faster than `classic`.\n\n";
    let mut header = vec!["configuration"];
    let size_labels: Vec<String> = ua.sizes().iter().map(|s| format!("{s} B")).collect();
    header.extend(size_labels.iter().map(String::as_str));
    let configs: Vec<String> = rows
        .iter()
        .filter(|r| r.size == ua.sizes()[0])
        .map(|r| r.config.clone())
        .collect();
    let table: Vec<Vec<String>> = configs
        .iter()
        .map(|c| {
            std::iter::once(format!("`{c}`"))
                .chain(ua.sizes().iter().map(|s| {
                    let r = rows
                        .iter()
                        .find(|r| &r.config == c && r.size == *s)
                        .expect("row");
                    format!(
                        "{:.1} ({:.2}x)",
                        r.ns_per_datagram, r.improvement_vs_classic
                    )
                }))
                .collect()
        })
        .collect();
    md += &md_table(&header, &table);
    md += "\nThe paper's table 7 (UDP/IP and socket time, initial over optimized): ";
    for (cpu, before, after) in udp::PAPER_TABLE_7 {
        let r: Vec<String> = before
            .iter()
            .zip(after)
            .map(|(b, a)| format!("{:.2}x", b / a))
            .collect();
        let _ = write!(md, "{cpu} {}; ", r.join(", "));
    }
    md += "for 59, 64, 509 and 512 bytes.\n\n![udp](udp.svg)\n\n";
    let series: Vec<Series> = ua
        .sizes()
        .iter()
        .map(|s| {
            (
                format!("{s} B"),
                configs
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        (
                            (i + 1) as f64,
                            rows.iter()
                                .find(|r| &r.config == c && r.size == *s)
                                .expect("row")
                                .ns_per_datagram,
                        )
                    })
                    .collect(),
            )
        })
        .collect();
    line_chart(
        &dir.join("udp.svg"),
        "ns per datagram, classic (1) to default (7)",
        "configuration step",
        "ns per datagram",
        &series,
        false,
    )?;

    // checksum
    println!("\n== checksum");
    let rows = checksum::measure(&checksum::ChecksumArgs::for_all(args.quick))?;
    checksum::print(&rows);
    common::write_json(&json("checksum.json"), &rows)?;
    md += "## checksum: every routine, and the fused copy (paper 000 table 8, paper 001)\n\nGB/s, median of interleaved rounds.\n\n";
    let names = common::distinct(rows.iter().map(|r| r.algorithm.clone()));
    let lens = checksum::LENGTHS;
    let labels: Vec<String> = lens
        .iter()
        .map(|&l| {
            if l >= 1 << 20 {
                format!("{} MiB", l >> 20)
            } else {
                l.to_string()
            }
        })
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
    let find = |n: &str, l: usize| {
        rows.iter()
            .find(|r| r.algorithm == n && r.bytes == l)
            .map(|r| r.ns_per_byte)
    };
    if let (Some(copy), Some(fused)) = (find("memcpy", 16 << 20), find("copy+checksum", 16 << 20)) {
        let _ = writeln!(md, "\nAt 16 MiB (out of cache) the fused copy+checksum takes {:.2}x the time of a copy alone (paper 000 table 8: 1.00x to 1.21x on 1990-93 workstations).\n", fused / copy);
    }
    md += "![checksum](checksum.svg)\n\n";
    let plotted: Vec<String> = names
        .iter()
        .filter(|n| *n != "ipv4-inline")
        .cloned()
        .collect();
    let series = series_by(
        &plotted,
        &rows,
        |r| &r.algorithm,
        |r| (r.bytes as f64, r.gbytes_per_s),
    );
    line_chart(
        &dir.join("checksum.svg"),
        "checksum and copy throughput by length",
        "bytes",
        "GB/s",
        &series,
        true,
    )?;

    // mtu
    println!("\n== mtu");
    let ma = mtu::MtuArgs::for_all(args.quick);
    let rows = mtu::measure(&ma)?;
    mtu::print(&rows, ma.mtus());
    common::write_json(&json("mtu.json"), &rows)?;
    for (protocol, svg) in [("udp", "mtu.svg"), ("tcp", "mtu-tcp.svg")] {
        let rows: Vec<mtu::MtuRow> = rows
            .iter()
            .filter(|r| r.protocol == protocol)
            .cloned()
            .collect();
        md += &format!(
            "## mtu: bulk {} by MTU and data-path optimization (paper 002 figures 2 and 3)\n\nGbit/s of payload between two stacks on the in-memory pair (one thread runs both).\n\n",
            protocol.to_uppercase()
        );
        let mut header = vec!["options"];
        let ml: Vec<String> = ma.mtus().iter().map(|m| m.to_string()).collect();
        header.extend(ml.iter().map(String::as_str));
        let opts = common::distinct(rows.iter().map(|r| r.options.clone()));
        let table: Vec<Vec<String>> = opts
            .iter()
            .map(|o| {
                std::iter::once(format!("`{o}`"))
                    .chain(ma.mtus().iter().map(|m| {
                        rows.iter()
                            .find(|r| &r.options == o && r.mtu == *m)
                            .map_or("-".into(), |r| format!("{:.1}", r.gbit_per_s))
                    }))
                    .collect()
            })
            .collect();
        md += &md_table(&header, &table);
        md += &format!("\nPaper 002 §4.2: with 1500-byte MTUs TCP never exceeded 740 Mb/s; 8 KB was the sweet spot; zero-copy and checksum offload together reached 2 Gb/s, limited by the NIC.\n\n![mtu {protocol}]({svg})\n\n");
        let series = series_by(
            &opts,
            &rows,
            |r| &r.options,
            |r| (r.mtu as f64, r.gbit_per_s),
        );
        line_chart(
            &dir.join(svg),
            &format!("{} payload bandwidth vs MTU", protocol.to_uppercase()),
            "MTU (bytes)",
            "Gbit/s",
            &series,
            true,
        )?;
    }

    // sweep
    println!("\n== sweep");
    let rows = sweep::measure(&sweep::SweepArgs::for_all(args.quick))?;
    sweep::print(&rows);
    common::write_json(&json("sweep.json"), &rows)?;
    md += "## sweep: where the time goes, by message size (paper 001 figures 1-10 and table 1, paper 004)\n\n";
    let per: Vec<&sweep::SweepRow> = rows.iter().filter(|r| r.table == "per-message").collect();
    let xs: Vec<f64> = per
        .iter()
        .filter(|r| r.side == "receive")
        .map(|r| r.size as f64)
        .collect();
    if per.iter().any(|r| r.ops_ns.is_some()) {
        for side in ["send", "receive"] {
            let side_rows: Vec<&&sweep::SweepRow> = per.iter().filter(|r| r.side == side).collect();
            let layers: Vec<(String, Vec<f64>)> =
                ["checksum", "copy", "copy+checksum", "buffers", "other"]
                    .iter()
                    .enumerate()
                    .map(|(k, name)| {
                        (
                            name.to_string(),
                            side_rows
                                .iter()
                                .map(|r| r.ops_ns.expect("instrumented")[k])
                                .collect(),
                        )
                    })
                    .collect();
            stacked_chart(
                &dir.join(format!("sweep-{side}.svg")),
                &format!("{side} side: ns per message by operation"),
                "message size (bytes)",
                "ns per message",
                &xs,
                &layers,
            )?;
            let _ = writeln!(md, "![sweep {side}](sweep-{side}.svg)\n");
        }
    } else {
        let totals: Vec<f64> = per
            .iter()
            .filter(|r| r.side == "send")
            .map(|r| 2.0 * r.ns_per_message)
            .collect();
        stacked_chart(
            &dir.join("sweep.svg"),
            "ns per message (build with --features instrument for the split)",
            "message size (bytes)",
            "ns per message",
            &xs,
            &[("total".to_string(), totals)],
        )?;
        md += "![sweep](sweep.svg)\n\nBuilt without the `instrument` feature: no split by operation and layer.\n\n";
    }
    let t: Vec<&sweep::SweepRow> = rows.iter().filter(|r| r.table == "throughput").collect();
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

    // demux
    println!("\n== demux");
    let da = demux::DemuxBenchArgs::for_all();
    let cells = demux::measure_cells(&da);
    common::write_json(&json("demux.json"), &cells)?;
    md += "## demux: lookup cost vs socket count (paper 003)\n\nns per lookup, median of interleaved rounds. For the trace-driven simulation of the paper's tables, run `fastpath demux-sim --synthetic lennon --instructions`.\n\n";
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
        &cells,
        |c| &c.strategy,
        |c| (c.sockets as f64, c.ns_per_lookup),
    );
    line_chart(
        &dir.join("demux.svg"),
        "ns per lookup vs bound sockets",
        "sockets",
        "ns per lookup",
        &series,
        true,
    )?;

    // peers
    println!("\n== peers");
    let rows = peers::measure(&peers::PeersArgs::for_all(args.quick))?;
    peers::print(&rows);
    common::write_json(&json("peers.json"), &rows)?;
    md += "## peers: fastpath, smoltcp and the Linux kernel on one workload\n\nMillions of datagrams per second (send_to and receive over loopback, median of interleaved rounds); b1 sends one datagram per poll, b32 a burst of 32; in brackets, fastpath's rate over this stack's.\n\n";
    let cols = common::distinct(rows.iter().map(|r| (r.stack.clone(), r.burst)));
    let names: Vec<String> = cols.iter().map(|(s, b)| format!("{s} b{b}")).collect();
    let mut header = vec!["size", "sockets"];
    header.extend(names.iter().map(String::as_str));
    // The report's table is IPv4's, the papers' family; `bench peers` prints IPv6 beside it.
    let rows: Vec<_> = rows.iter().filter(|r| r.family == 4).cloned().collect();
    let rows = &rows[..];
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

    let path = dir.join("REPORT.md");
    std::fs::write(&path, md).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("\nwrote {}", path.display());
    Ok(())
}
