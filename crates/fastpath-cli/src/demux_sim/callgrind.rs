//! Counting instructions per lookup, the paper's metric, with valgrind's callgrind.
//!
//! The running executable is started again under callgrind with a hidden option that replays one
//! strategy's events; callgrind collects only inside
//! [`counted_lookup`](super::replay::counted_lookup), and the total `Ir` (instructions executed) of its
//! output file, divided by the lookups, is the mean instruction count.

use std::ffi::OsString;
use std::fs;
use std::io::ErrorKind;
use std::process::Command;

use super::replay::COUNTED_LOOKUP_PATTERN;

/// Checks that valgrind can be started.
pub fn check_valgrind() -> Result<(), String> {
    match Command::new("valgrind").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "--instructions needs valgrind, and `valgrind --version` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) if e.kind() == ErrorKind::NotFound => Err(
            "--instructions needs valgrind (callgrind counts the instructions), and valgrind is not \
             installed or not on PATH; install it (e.g. `apt-get install valgrind`) or drop \
             --instructions"
                .to_string(),
        ),
        Err(e) => Err(format!("--instructions needs valgrind, which would not start: {e}")),
    }
}

/// The total instructions (`Ir`) callgrind collected inside the counted lookups when this executable
/// replays `which` (a strategy name, or `null`) on the trace `source` describes (the options that
/// select the trace).
pub fn instructions(source: &[OsString], which: &str) -> Result<u64, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let out_file = std::env::temp_dir().join(format!(
        "fastpath-callgrind-{}-{}.out",
        std::process::id(),
        which.replace([':', '/'], "_")
    ));
    let mut cmd = Command::new("valgrind");
    cmd.arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg("--collect-atstart=no")
        .arg(format!("--toggle-collect={COUNTED_LOOKUP_PATTERN}"))
        .arg(&exe)
        .arg("demux-sim")
        .args(source)
        .arg("--replay-one")
        .arg(which);
    let output = cmd
        .output()
        .map_err(|e| format!("cannot run valgrind: {e}"))?;
    let text = fs::read_to_string(&out_file);
    let _ = fs::remove_file(&out_file);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
        return Err(format!(
            "callgrind replay of {which} failed ({}):\n{}",
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    let text = text.map_err(|e| format!("callgrind wrote no output for {which}: {e}"))?;
    total_ir(&text)
        .ok_or_else(|| format!("no `summary:` or `totals:` line in callgrind's output for {which}"))
}

/// The first event count (`Ir`) of the `summary:` line of a callgrind output file, else of its
/// `totals:` line.
pub fn total_ir(text: &str) -> Option<u64> {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
    };
    field("summary:").or_else(|| field("totals:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_summary_then_totals() {
        let file = "version: 1\nevents: Ir\nfn=(1) main\n3 10\nsummary: 1234\ntotals: 99\n";
        assert_eq!(total_ir(file), Some(1234));
        assert_eq!(total_ir("events: Ir\ntotals: 77 5\n"), Some(77));
        assert_eq!(total_ir("events: Ir\n"), None);
    }
}
