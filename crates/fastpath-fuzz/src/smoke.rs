//! The deterministic smoke run: the seed corpus, then seeded random inputs (mostly mutations of the
//! seeds), through one target. No coverage feedback, so it finds only shallow bugs; it exists so that
//! every target runs on every `cargo test`, and a target that stops compiling or starts failing on
//! its own seeds is noticed at once. Campaigns are cargo-fuzz's job (see `fuzz/README.md`).

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use fastpath::rng::Rng;

use crate::Target;

/// The committed seed corpus of `target`: `seeds/<target>/` in this crate, every file, by name.
pub fn seed_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(target)
}

/// Every file in `dir` (not recursing), sorted by name; empty if `dir` does not exist.
pub fn read_corpus(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(String, Vec<u8>)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_file())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let bytes =
                fs::read(e.path()).unwrap_or_else(|err| panic!("{}: {err}", e.path().display()));
            (name, bytes)
        })
        .collect();
    files.sort();
    files
}

/// Changes `data` a few times the way a fuzzer's mutators do: flip bits, set bytes to interesting
/// values, insert, delete, duplicate or splice in a piece of `other`, truncate.
pub fn mutate(rng: &mut Rng, data: &mut Vec<u8>, other: &[u8]) {
    for _ in 0..1 + rng.below(6) {
        let len = data.len() as u64;
        match rng.below(9) {
            0 if len > 0 => {
                let at = rng.below(len) as usize;
                data[at] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let at = rng.below(len) as usize;
                data[at] = [0, 1, 0x7f, 0x80, 0xff, 0x40, 0x45, 8, 17][rng.below(9) as usize];
            }
            2 if len > 0 => {
                let at = rng.below(len) as usize;
                data[at] = rng.next_u64() as u8;
            }
            3 => {
                let at = rng.below(len + 1) as usize;
                let n = 1 + rng.below(16) as usize;
                let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                data.splice(at..at, bytes);
            }
            4 if len > 0 => {
                let from = rng.below(len) as usize;
                let to = (from + 1 + rng.below(32) as usize).min(data.len());
                data.drain(from..to);
            }
            5 if len > 0 => {
                let from = rng.below(len) as usize;
                let to = (from + 1 + rng.below(64) as usize).min(data.len());
                let piece = data[from..to].to_vec();
                let at = rng.below(len + 1) as usize;
                data.splice(at..at, piece);
            }
            6 if !other.is_empty() => {
                let from = rng.below(other.len() as u64) as usize;
                let to = (from + 1 + rng.below(128) as usize).min(other.len());
                let at = rng.below(len + 1) as usize;
                data.splice(at..at, other[from..to].iter().copied());
            }
            7 if len > 0 => data.truncate(rng.below(len) as usize),
            _ if len >= 2 => {
                // A 16-bit field set to an edge value.
                let at = rng.below(len - 1) as usize;
                let v: u16 = [0, 1, 7, 8, 19, 20, 0x3fff, 0x7fff, 0xffff][rng.below(9) as usize];
                data[at..at + 2].copy_from_slice(&v.to_be_bytes());
            }
            _ => data.push(rng.next_u64() as u8),
        }
    }
}

/// Runs `target` on `input`; if it panics, saves the input to a file in the temporary directory,
/// says where (and the bytes, if few) and panics again.
pub fn run_one(name: &str, target: Target, input: &[u8], what: &str) {
    let result = panic::catch_unwind(AssertUnwindSafe(|| target(input)));
    if let Err(e) = result {
        let path = std::env::temp_dir().join(format!("fastpath-fuzz-{name}-{:016x}", fnv(input)));
        let saved = fs::write(&path, input).is_ok();
        eprintln!(
            "target {name} failed on {what} ({} bytes){}; replay with: cargo run -p fastpath-fuzz --release -- run {name} {}",
            input.len(),
            if input.len() <= 256 { format!(": {input:02x?}") } else { String::new() },
            if saved { path.display().to_string() } else { "(could not save the input)".into() },
        );
        panic::resume_unwind(e);
    }
}

/// Runs `target` over its seed corpus, then `iterations` inputs from a generator seeded with
/// `seed`: three in four are mutations of a seed (or of an earlier input), one in four random bytes.
/// Returns how many inputs ran.
pub fn smoke(name: &str, target: Target, iterations: usize, seed: u64) -> usize {
    let seeds: Vec<Vec<u8>> = read_corpus(&seed_dir(name))
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    for (i, s) in seeds.iter().enumerate() {
        run_one(name, target, s, &format!("seed {i}"));
    }
    let mut rng = Rng::new(seed ^ fnv(name.as_bytes()));
    let mut last: Vec<u8> = Vec::new();
    for i in 0..iterations {
        let input = if seeds.is_empty() || rng.below(4) == 0 {
            let n = rng.below(600) as usize;
            (0..n).map(|_| rng.next_u64() as u8).collect()
        } else {
            let base = if !last.is_empty() && rng.below(3) == 0 {
                last.clone()
            } else {
                seeds[rng.below(seeds.len() as u64) as usize].clone()
            };
            let other = &seeds[rng.below(seeds.len() as u64) as usize];
            let mut data = base;
            mutate(&mut rng, &mut data, other);
            data
        };
        run_one(
            name,
            target,
            &input,
            &format!("generated input {i} (seed {seed})"),
        );
        last = input;
    }
    seeds.len() + iterations
}

/// FNV-1a, for naming saved inputs and deriving per-target seeds.
fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
