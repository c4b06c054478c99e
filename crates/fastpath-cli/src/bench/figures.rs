//! The report's SVG figures: line charts over logarithmic or linear axes, a stacked area chart and a
//! grouped bar chart. Every series has a colour and a marker (and, past the sixth, a dashed line) of
//! its own; the legend stands to the right of the plot, clear of the data; ticks are whole numbers,
//! and byte axes say KiB and MiB.

use std::path::Path;

use plotters::coord::combinators::BindKeyPoints;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One named line: its points (x, y).
pub type Series = (String, Vec<(f64, f64)>);

/// Width and height of a figure, in pixels.
const SIZE: (u32, u32) = (960, 500);
/// Width of the legend to the right of the plot.
const LEGEND_WIDTH: u32 = 230;
/// Marker shapes, cycled through before the lines turn dashed.
const MARKERS: usize = 6;

/// The colours, one per series: Tableau's ten, then black and navy.
const PALETTE: [RGBColor; 12] = [
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
    RGBColor(0, 0, 0),
    RGBColor(0, 0, 128),
];

/// The colour of series `i`.
pub fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Whether series `i` is drawn dashed: past the markers' first round, so that colour, marker and
/// dash together tell every series apart.
fn dashed(i: usize) -> bool {
    (i / MARKERS) % 2 == 1
}

/// An axis tick as a number: a whole number without decimals ("100", not "100.0"), otherwise up to
/// three decimals, trailing zeros dropped ("0.25").
pub fn number_tick(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    let rounded = v.round();
    if (v - rounded).abs() <= 1e-9 * v.abs().max(1.0) {
        return format!("{}", rounded as i64);
    }
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// An axis tick in bytes: whole multiples of 1 KiB or 1 MiB in those units ("1 KiB", "16 MiB"), any
/// other number as [`number_tick`] writes it ("1500").
pub fn bytes_tick(v: f64) -> String {
    const KIB: f64 = 1024.0;
    const MIB: f64 = 1024.0 * 1024.0;
    let whole = v.round();
    if (v - whole).abs() > 1e-6 || whole < KIB {
        return number_tick(v);
    }
    if whole % MIB == 0.0 {
        format!("{} MiB", whole / MIB)
    } else if whole % KIB == 0.0 {
        format!("{} KiB", whole / KIB)
    } else {
        number_tick(v)
    }
}

/// What an axis shows.
pub struct Axis<'a> {
    /// Its label.
    pub desc: &'a str,
    /// Logarithmic.
    pub log: bool,
    /// Its values are bytes ([`bytes_tick`]); otherwise plain numbers ([`number_tick`]).
    pub bytes: bool,
    /// The ticks: these values; otherwise powers (of 4 for bytes, else 1, 2 and 5 times powers of
    /// 10) on a logarithmic axis, and plotters' choice on a linear one.
    pub ticks: Option<Vec<f64>>,
}

impl<'a> Axis<'a> {
    /// A logarithmic axis.
    pub fn log(desc: &'a str) -> Axis<'a> {
        Axis {
            desc,
            log: true,
            bytes: false,
            ticks: None,
        }
    }

    /// A linear axis from 0.
    pub fn linear(desc: &'a str) -> Axis<'a> {
        Axis {
            desc,
            log: false,
            bytes: false,
            ticks: None,
        }
    }

    /// Values in bytes.
    pub fn bytes(mut self) -> Axis<'a> {
        self.bytes = true;
        self
    }

    /// Ticks at these values.
    pub fn ticks(mut self, ticks: Vec<f64>) -> Axis<'a> {
        self.ticks = Some(ticks);
        self
    }

    fn format(&self, v: f64) -> String {
        if self.bytes {
            bytes_tick(v)
        } else {
            number_tick(v)
        }
    }

    /// The ticks of a logarithmic axis over `lo..hi`.
    fn log_ticks(&self, lo: f64, hi: f64) -> Vec<f64> {
        if let Some(t) = &self.ticks {
            return t.clone();
        }
        let mut ticks = Vec::new();
        if self.bytes {
            let mut p = 1.0;
            while p <= hi {
                if p >= lo {
                    ticks.push(p);
                }
                p *= 4.0;
            }
        } else {
            let decades = (hi / lo).log10();
            let steps: &[f64] = if decades <= 3.0 {
                &[1.0, 2.0, 5.0]
            } else {
                &[1.0]
            };
            let mut p = 10f64.powf(lo.log10().floor());
            while p <= hi {
                for s in steps {
                    let v = p * s;
                    if v >= lo && v <= hi {
                        ticks.push(v);
                    }
                }
                p *= 10.0;
            }
        }
        ticks
    }
}

fn drawing_error(path: &Path) -> impl Fn(&dyn std::fmt::Display) -> String + '_ {
    move |e| format!("drawing {}: {e}", path.display())
}

/// The figure's canvas, split into the plot (left) and the legend (right).
type Areas<'a> = (
    DrawingArea<SVGBackend<'a>, Shift>,
    DrawingArea<SVGBackend<'a>, Shift>,
);

fn canvas<'a>(path: &'a Path, title: &str) -> Result<Areas<'a>, String> {
    let e = drawing_error(path);
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let root = root.titled(title, ("sans-serif", 20)).map_err(|x| e(&x))?;
    let (plot, legend) = root.split_horizontally(SIZE.0 - LEGEND_WIDTH);
    Ok((plot, legend))
}

/// Evaluates `$body` with `$make` bound to a function from a position to the marker of kind
/// `$kind` (cycling through six shapes: filled circle, square and triangle, a cross, open circle and
/// square) in `$colour` at that position. (Each shape is a type of its own, hence a macro.)
macro_rules! with_marker {
    ($kind:expr, $colour:expr, $make:ident => $body:expr) => {{
        let (filled, outline) = ($colour.filled(), $colour.stroke_width(2));
        match $kind % MARKERS {
            0 => {
                let $make = |at| EmptyElement::at(at) + Circle::new((0, 0), 4, filled);
                $body
            }
            1 => {
                let $make = |at| EmptyElement::at(at) + Rectangle::new([(-4, -4), (4, 4)], filled);
                $body
            }
            2 => {
                let $make = |at| EmptyElement::at(at) + TriangleMarker::new((0, 0), 5, filled);
                $body
            }
            3 => {
                let $make = |at| EmptyElement::at(at) + Cross::new((0, 0), 4, outline);
                $body
            }
            4 => {
                let $make = |at| EmptyElement::at(at) + Circle::new((0, 0), 4, outline);
                $body
            }
            _ => {
                let $make = |at| EmptyElement::at(at) + Rectangle::new([(-4, -4), (4, 4)], outline);
                $body
            }
        }
    }};
}

/// How a legend entry shows its series.
#[derive(Clone, Copy)]
enum Key {
    /// A line in the series' style, with its marker.
    Line,
    /// A filled box (areas and bars).
    Swatch,
}

/// The legend, top down in the right-hand area: each entry's key (in the style of the series of that
/// index) and name.
fn legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    entries: &[(&str, usize)],
    key: Key,
    path: &Path,
) -> Result<(), String> {
    let e = drawing_error(path);
    let style = ("sans-serif", 14).into_font().color(&BLACK);
    let style = style.pos(Pos::new(HPos::Left, VPos::Center));
    let (x, top) = (12, 40);
    for (row, &(name, i)) in entries.iter().enumerate() {
        let y = top + 24 * row as i32;
        let c = colour(i);
        match key {
            Key::Line => {
                let line = [(x, y), (x + 36, y)];
                if dashed(i) {
                    area.draw(&DashedPathElement::new(line, 6, 4, c.stroke_width(2)))
                        .map_err(|x| e(&x))?;
                } else {
                    area.draw(&PathElement::new(line, c.stroke_width(2)))
                        .map_err(|x| e(&x))?;
                }
                with_marker!(i, c, make => area.draw(&make((x + 18, y)))).map_err(|x| e(&x))?;
            }
            Key::Swatch => {
                area.draw(&Rectangle::new(
                    [(x + 8, y - 7), (x + 28, y + 7)],
                    c.filled(),
                ))
                .map_err(|x| e(&x))?;
            }
        }
        area.draw(&Text::new(name.to_string(), (x + 46, y), style.clone()))
            .map_err(|x| e(&x))?;
    }
    Ok(())
}

/// Draws `series` as lines with markers into `chart`, with axis labels.
fn draw_lines<'a, 'b: 'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, Y>>,
    x: &Axis,
    y: &Axis,
    series: &[Series],
    path: &Path,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let e = drawing_error(path);
    let xf = |v: &f64| x.format(*v);
    let yf = |v: &f64| y.format(*v);
    chart
        .configure_mesh()
        .x_desc(x.desc)
        .y_desc(y.desc)
        .x_label_formatter(&xf)
        .y_label_formatter(&yf)
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(|x| e(&x))?;
    for (i, (_, points)) in series.iter().enumerate() {
        let c = colour(i);
        if dashed(i) {
            chart
                .draw_series(DashedLineSeries::new(
                    points.clone(),
                    6,
                    4,
                    c.stroke_width(2),
                ))
                .map_err(|x| e(&x))?;
        } else {
            chart
                .draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))
                .map_err(|x| e(&x))?;
        }
        with_marker!(i, c, make => chart.draw_series(points.iter().map(|&p| make(p))))
            .map_err(|x| e(&x))?;
    }
    Ok(())
}

/// The least and greatest of `values`.
fn extent(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)))
}

/// A line chart into `path`: the x axis logarithmic (values above 0), the y axis as `y` says; the
/// legend to the right.
pub fn line_chart(
    path: &Path,
    title: &str,
    x: &Axis,
    y: &Axis,
    series: &[Series],
) -> Result<(), String> {
    let e = drawing_error(path);
    let (x0, x1) = extent(series.iter().flat_map(|(_, p)| p.iter().map(|q| q.0)));
    let (y0, y1) = extent(series.iter().flat_map(|(_, p)| p.iter().map(|q| q.1)));
    if x0 > x1 {
        return Err(format!("{}: no points to draw", path.display()));
    }
    let (plot, legend_area) = canvas(path, title)?;
    let mut builder = ChartBuilder::on(&plot);
    builder
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(70);
    let (xl, xh) = (x0.max(1e-9) / 1.15, x1 * 1.15);
    let xr = (xl..xh).log_scale().with_key_points(x.log_ticks(xl, xh));
    if y.log {
        let (yl, yh) = (y0.max(1e-9) / 1.3, y1 * 1.3);
        let yr = (yl..yh).log_scale().with_key_points(y.log_ticks(yl, yh));
        let mut chart = builder.build_cartesian_2d(xr, yr).map_err(|x| e(&x))?;
        draw_lines(&mut chart, x, y, series, path)?;
    } else {
        let mut chart = builder
            .build_cartesian_2d(xr, 0.0..(y1 * 1.1).max(1e-9))
            .map_err(|x| e(&x))?;
        draw_lines(&mut chart, x, y, series, path)?;
    }
    let entries: Vec<(&str, usize)> = series
        .iter()
        .enumerate()
        .map(|(i, (n, _))| (n.as_str(), i))
        .collect();
    legend(&legend_area, &entries, Key::Line, path)?;
    plot.present().map_err(|x| e(&x))
}

/// A stacked area chart (linear axes from 0) into `path`: `layers` stacked bottom up over `xs`
/// (whole numbers, such as message sizes).
pub fn stacked_chart(
    path: &Path,
    title: &str,
    x: &Axis,
    y: &Axis,
    xs: &[i64],
    layers: &[(String, Vec<f64>)],
) -> Result<(), String> {
    let e = drawing_error(path);
    let totals: Vec<f64> = (0..xs.len())
        .map(|i| layers.iter().map(|(_, v)| v[i]).sum())
        .collect();
    let ymax = totals.iter().cloned().fold(0.0, f64::max) * 1.1;
    let xmax = xs.last().copied().unwrap_or(1).max(1);
    let (plot, legend_area) = canvas(path, title)?;
    let mut builder = ChartBuilder::on(&plot);
    builder
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(70);
    let ticks: Vec<i64> = match &x.ticks {
        Some(t) => t.iter().map(|&v| v as i64).collect(),
        None => vec![0, xmax],
    };
    let mut chart = builder
        .build_cartesian_2d((0..xmax).with_key_points(ticks), 0.0..ymax.max(1e-9))
        .map_err(|x| e(&x))?;
    let xf = |v: &i64| x.format(*v as f64);
    let yf = |v: &f64| y.format(*v);
    chart
        .configure_mesh()
        .x_desc(x.desc)
        .y_desc(y.desc)
        .x_label_formatter(&xf)
        .y_label_formatter(&yf)
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(|x| e(&x))?;
    // The cumulative tops, drawn from the highest down, so that each band shows.
    for k in (0..layers.len()).rev() {
        let c = colour(k);
        let top: Vec<(i64, f64)> = xs
            .iter()
            .enumerate()
            .map(|(i, &x)| (x, layers[..=k].iter().map(|(_, v)| v[i]).sum()))
            .collect();
        chart
            .draw_series(AreaSeries::new(top, 0.0, c.mix(0.85)).border_style(c))
            .map_err(|x| e(&x))?;
    }
    // The legend lists the layers top down, as the bands lie.
    let entries: Vec<(&str, usize)> = layers
        .iter()
        .enumerate()
        .rev()
        .map(|(i, (n, _))| (n.as_str(), i))
        .collect();
    legend(&legend_area, &entries, Key::Swatch, path)?;
    plot.present().map_err(|x| e(&x))
}

/// Splits a category name into lines of about `width` characters at its hyphens.
fn wrap_name(name: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let parts: Vec<&str> = name.split_inclusive('-').collect();
    for part in parts {
        if !line.is_empty() && line.len() + part.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        line.push_str(part);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// A grouped bar chart into `path`: one group per name of `groups` (its label under it), in each a
/// bar per name of `bars`, `values[group][bar]` high, over a linear y axis from 0.
pub fn grouped_bars(
    path: &Path,
    title: &str,
    groups: &[String],
    bars: &[String],
    values: &[Vec<f64>],
    y: &Axis,
) -> Result<(), String> {
    let e = drawing_error(path);
    let ymax = values
        .iter()
        .flatten()
        .cloned()
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.1;
    let (plot, legend_area) = canvas(path, title)?;
    let n = groups.len() as f64;
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(56)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..n, 0.0..ymax)
        .map_err(|x| e(&x))?;
    let yf = |v: &f64| y.format(*v);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(y.desc)
        .y_label_formatter(&yf)
        .x_label_formatter(&|_| String::new())
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(|x| e(&x))?;
    let k = bars.len().max(1) as f64;
    let width = 0.8 / k;
    for (b, _) in bars.iter().enumerate() {
        let c = colour(b);
        chart
            .draw_series(groups.iter().enumerate().map(|(g, _)| {
                let x0 = g as f64 + 0.1 + b as f64 * width;
                let v = values[g].get(b).copied().unwrap_or(0.0);
                Rectangle::new([(x0, 0.0), (x0 + width * 0.92, v)], c.filled())
            }))
            .map_err(|x| e(&x))?;
    }
    // The groups' names under the axis, on up to two lines each.
    let style = ("sans-serif", 13)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (g, name) in groups.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(g as f64 + 0.5, 0.0));
        for (l, line) in wrap_name(name, 14).iter().enumerate() {
            plot.draw(&Text::new(
                line.clone(),
                (px, py + 8 + 16 * l as i32),
                style.clone(),
            ))
            .map_err(|x| e(&x))?;
        }
    }
    let entries: Vec<(&str, usize)> = bars
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    legend(&legend_area, &entries, Key::Swatch, path)?;
    plot.present().map_err(|x| e(&x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_whole_numbers_and_bytes_say_kib_and_mib() {
        assert_eq!(number_tick(100.0), "100");
        assert_eq!(number_tick(10_000_000.0), "10000000");
        assert_eq!(number_tick(0.0), "0");
        assert_eq!(number_tick(0.5), "0.5");
        assert_eq!(number_tick(2.25), "2.25");
        assert_eq!(bytes_tick(1024.0), "1 KiB");
        assert_eq!(bytes_tick(1_048_576.0), "1 MiB");
        assert_eq!(bytes_tick(16.0 * 1_048_576.0), "16 MiB");
        assert_eq!(bytes_tick(65_536.0), "64 KiB");
        assert_eq!(bytes_tick(100.0), "100");
        assert_eq!(bytes_tick(1500.0), "1500");
        assert_eq!(bytes_tick(65_535.0), "65535");
    }

    #[test]
    fn log_ticks_are_powers() {
        let bytes = Axis::log("bytes").bytes();
        assert_eq!(
            bytes.log_ticks(17.0, 20_000_000.0),
            [
                64.0,
                256.0,
                1024.0,
                4096.0,
                16384.0,
                65536.0,
                262_144.0,
                1_048_576.0,
                4_194_304.0,
                16_777_216.0
            ]
        );
        let n = Axis::log("ns");
        assert_eq!(n.log_ticks(3.0, 60.0), [5.0, 10.0, 20.0, 50.0]);
        assert_eq!(n.log_ticks(3.0, 60_000.0), [10.0, 100.0, 1000.0, 10_000.0]);
    }

    #[test]
    fn every_series_differs_in_colour_and_in_marker_or_dash() {
        let looks: Vec<(RGBColor, usize, bool)> = (0..12)
            .map(|i| (colour(i), i % MARKERS, dashed(i)))
            .collect();
        for (i, a) in looks.iter().enumerate() {
            for b in &looks[i + 1..] {
                assert_ne!(a.0, b.0, "two series share a colour");
                assert_ne!((a.1, a.2), (b.1, b.2), "two series share marker and dash");
            }
        }
    }

    #[test]
    fn long_names_wrap_at_hyphens() {
        assert_eq!(wrap_name("classic", 14), ["classic"]);
        assert_eq!(
            wrap_name("inline-header-checksum", 14),
            ["inline-header-", "checksum"]
        );
        assert_eq!(
            wrap_name("no-pseudo-connect", 14),
            ["no-pseudo-", "connect"]
        );
    }
}
