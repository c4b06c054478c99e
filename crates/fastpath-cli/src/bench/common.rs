//! Conventions every experiment follows: it says what machine and build it ran on, repeats and
//! interleaves what it compares and quotes medians, shows progress, and can write its rows as JSON.

use std::io::Write;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

/// One line describing the machine: CPU model, cores, kernel, the CPU features the stack uses.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").map_or_else(
        |_| std::env::consts::OS.to_string(),
        |k| k.trim().to_string(),
    );
    let checksum = fastpath::checksum::Algorithm::fastest();
    format!("{model}, {cores} cores, kernel {kernel}, checksum {checksum}")
}

/// One line describing the build: profile and features.
pub fn build() -> String {
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let features = if cfg!(feature = "instrument") {
        "instrument"
    } else {
        "none"
    };
    format!("{profile} build, features: {features}")
}

/// Prints the experiment's title, the machine and the build.
pub fn header(title: &str) {
    println!("{title}");
    println!("machine: {}", machine());
    println!("build:   {}", build());
    println!();
}

/// The median of `values` (the mean of the middle two for an even count); NaN if empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Writes `rows` as a JSON array to `path` (`-`: standard output).
pub fn write_json<T: Serialize>(path: &str, rows: &[T]) -> Result<(), String> {
    let text = serde_json::to_string_pretty(rows).map_err(|e| e.to_string())?;
    if path == "-" {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{text}").map_err(|e| e.to_string())
    } else {
        std::fs::write(path, text + "\n").map_err(|e| format!("writing {path}: {e}"))
    }
}

/// A progress bar of `len` steps (drawn only on a terminal).
pub fn progress(len: u64, message: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}")
            .expect("valid template"),
    );
    bar.set_message(message.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Cycle-counter ticks per nanosecond, measured over 50 ms (1.0 without the `instrument` feature,
/// where there are no cycle counts to convert).
pub fn cycles_per_ns() -> f64 {
    #[cfg(feature = "instrument")]
    {
        let (c0, t0) = (fastpath::instrument::cycles(), std::time::Instant::now());
        std::thread::sleep(Duration::from_millis(50));
        let (c1, t1) = (fastpath::instrument::cycles(), std::time::Instant::now());
        return (c1 - c0) as f64 / (t1 - t0).as_nanos() as f64;
    }
    #[allow(unreachable_code)]
    1.0
}

/// The distinct values of `items`, in order of first appearance.
pub fn distinct<T: PartialEq>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}
