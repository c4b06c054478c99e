//! Conventions every experiment follows: it says what machine and build it ran on, repeats and
//! interleaves what it compares and quotes medians, shows progress, and can write its rows as JSON.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Seek, Write};
use std::sync::atomic::{AtomicBool, Ordering};
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

/// Whether the tables go to standard error, because the JSON rows go to standard output (`--json -`).
static TABLES_TO_STDERR: AtomicBool = AtomicBool::new(false);

/// Writes an experiment's human-readable output: to standard output, or to standard error once
/// [`JsonOut::open`] has sent the JSON to standard output, so that standard output holds nothing but
/// the JSON. What cannot be written (a closed pipe) is dropped.
pub fn say(args: std::fmt::Arguments) {
    if TABLES_TO_STDERR.load(Ordering::Relaxed) {
        let _ = std::io::stderr().lock().write_fmt(args);
    } else {
        let _ = std::io::stdout().lock().write_fmt(args);
    }
}

/// `print!` for an experiment's tables: see [`say`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::bench::common::say(format_args!($($arg)*))
    };
}

/// `println!` for an experiment's tables: see [`say`].
macro_rules! outln {
    () => {
        $crate::bench::common::say(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::bench::common::say(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {out, outln};

/// Prints the experiment's title, the machine and the build.
pub fn header(title: &str) {
    outln!("{title}");
    outln!("machine: {}", machine());
    outln!("build:   {}", build());
    outln!();
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

/// Where `--json PATH` sends an experiment's rows, opened before anything is measured: a path that
/// cannot be written fails at once, naming it, instead of after a measurement of minutes. `-` is
/// standard output, and then the tables go to standard error (see [`say`]).
pub struct JsonOut {
    target: JsonTarget,
}

enum JsonTarget {
    Stdout,
    File {
        path: String,
        file: File,
        /// Whether opening created the file (then it is removed again if the run writes nothing).
        created: bool,
        written: bool,
    },
}

impl JsonOut {
    /// Opens `--json`'s destination, if one was given. An existing file is kept as it is until the
    /// rows are written; a file created here is removed again if the experiment fails.
    pub fn open(path: Option<&str>) -> Result<Option<JsonOut>, String> {
        let Some(path) = path else {
            return Ok(None);
        };
        if path == "-" {
            TABLES_TO_STDERR.store(true, Ordering::Relaxed);
            return Ok(Some(JsonOut {
                target: JsonTarget::Stdout,
            }));
        }
        let fail = |e: std::io::Error| format!("--json {path}: cannot write there: {e}");
        let (file, created) = match OpenOptions::new().write(true).create_new(true).open(path) {
            Ok(f) => (f, true),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                let f = OpenOptions::new().write(true).open(path).map_err(fail)?;
                (f, false)
            }
            Err(e) => return Err(fail(e)),
        };
        Ok(Some(JsonOut {
            target: JsonTarget::File {
                path: path.to_string(),
                file,
                created,
                written: false,
            },
        }))
    }

    /// Writes `rows` as a pretty JSON array (replacing whatever the file held).
    pub fn write<T: Serialize>(mut self, rows: &[T]) -> Result<(), String> {
        let text = serde_json::to_string_pretty(rows).map_err(|e| e.to_string())? + "\n";
        match &mut self.target {
            JsonTarget::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes())
                    .and_then(|()| out.flush())
                    .map_err(|e| format!("--json -: writing standard output: {e}"))
            }
            JsonTarget::File {
                path,
                file,
                written,
                ..
            } => {
                *written = true;
                file.set_len(0)
                    .and_then(|()| file.rewind())
                    .and_then(|()| file.write_all(text.as_bytes()))
                    .map_err(|e| format!("--json {path}: writing: {e}"))
            }
        }
    }
}

impl Drop for JsonOut {
    fn drop(&mut self) {
        if let JsonTarget::File {
            path,
            created: true,
            written: false,
            ..
        } = &self.target
        {
            let _ = std::fs::remove_file(path);
        }
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

/// The least MTU an experiment accepts: 576 bytes, the datagram every IPv4 host must be able to take
/// (RFC 791) and the MTU TCP's default MSS of 536 assumes (RFC 9293), so that the IPv4 and TCP headers,
/// TCP's options (timestamps, SACK blocks) and a useful payload all fit in one packet.
pub const MIN_MTU: usize = 576;
/// The greatest MTU: an IPv4 packet's total length is 16 bits.
pub const MAX_MTU: usize = 65535;
/// The largest UDP payload IPv4 can carry (65535 less the IPv4 and UDP headers).
pub const MAX_UDP_PAYLOAD: u64 = 65507;

/// Parses an MTU for an experiment: [`MIN_MTU`] to [`MAX_MTU`].
pub fn parse_mtu(s: &str) -> Result<usize, String> {
    let mtu: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not an MTU (a number of bytes)"))?;
    if (MIN_MTU..=MAX_MTU).contains(&mtu) {
        Ok(mtu)
    } else {
        Err(format!(
            "MTU {mtu} outside {MIN_MTU}..={MAX_MTU} (576: the packet every IPv4 host takes and \
             TCP's default MSS assumes, room for the headers, options and payload; 65535: IPv4's limit)"
        ))
    }
}

/// Parses seconds per measurement: 0.05 (shorter is timer noise) to 3600.
pub fn parse_measure_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.05..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "`{s}` is not a number of seconds from 0.05 to 3600"
        )),
    }
}

/// Parses a time (seconds or milliseconds) that must be finite and above zero.
pub fn parse_positive(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a finite number above 0")),
    }
}

/// Parses a time in seconds (or milliseconds) that must be finite and not negative.
pub fn parse_non_negative(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a finite number of at least 0")),
    }
}

/// A value parser for a count of at least `min` and at most `max`.
pub fn count(min: u64, max: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(min..=max)
}

/// The calling thread's schedstat path (`/proc/PID/task/TID/schedstat`), to read its CPU time from
/// another thread.
pub fn own_schedstat() -> Option<std::path::PathBuf> {
    let task = std::fs::read_link("/proc/thread-self").ok()?;
    Some(std::path::Path::new("/proc").join(task).join("schedstat"))
}

/// Nanoseconds a thread has run, from its schedstat file (0 if it is gone).
pub fn cpu_ns(schedstat: &std::path::Path) -> u64 {
    std::fs::read_to_string(schedstat)
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Nanoseconds of CPU the whole process has used, every thread included, as (user, system), at the
/// clock tick's resolution (`/proc/self/stat`, assuming 100 ticks a second, Linux's `USER_HZ`).
pub fn process_cpu_ns() -> (u64, u64) {
    stat_times("/proc/self/stat")
}

/// The same for the calling thread alone (`/proc/thread-self/stat`).
pub fn thread_cpu_ns() -> (u64, u64) {
    stat_times("/proc/thread-self/stat")
}

/// utime and stime of a `stat` file, in nanoseconds.
fn stat_times(path: &str) -> (u64, u64) {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the command name (which may hold spaces) in parentheses: utime is the 14th field
    // of the line, stime the 15th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let mut fields = rest
        .split_whitespace()
        .skip(11)
        .map(|f| f.parse::<u64>().unwrap_or(0) * 10_000_000);
    (fields.next().unwrap_or(0), fields.next().unwrap_or(0))
}
