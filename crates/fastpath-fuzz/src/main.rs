//! `fastpath-fuzz`: the targets without cargo-fuzz.
//!
//! ```text
//! fastpath-fuzz run TARGET PATH...          run TARGET on files (or every file in directories)
//! fastpath-fuzz smoke [TARGET] [N] [SEED]   the seed corpus, then N seeded random inputs (default 5000)
//! fastpath-fuzz seeds [DIR]                 write the seed corpus (default: this crate's seeds/)
//! fastpath-fuzz list                        the targets
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use fastpath_fuzz::{seeds, smoke, target, TARGETS};

fn usage() -> ExitCode {
    eprintln!(
        "usage: fastpath-fuzz run TARGET PATH... | smoke [TARGET] [N] [SEED] | seeds [DIR] | list"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("list") => {
            for (name, _) in TARGETS {
                println!("{name}");
            }
        }
        Some("run") if args.len() >= 3 => {
            let Some(t) = target(&args[1]) else {
                eprintln!("no target {}", args[1]);
                return usage();
            };
            let mut n = 0;
            for path in &args[2..] {
                let path = Path::new(path);
                let files = if path.is_dir() {
                    smoke::read_corpus(path)
                } else {
                    vec![(
                        path.display().to_string(),
                        std::fs::read(path).expect("readable file"),
                    )]
                };
                for (name, bytes) in files {
                    smoke::run_one(&args[1], t, &bytes, &name);
                    n += 1;
                }
            }
            println!("{}: {n} inputs, no failure", args[1]);
        }
        Some("smoke") => {
            let names: Vec<&str> = match args.get(1) {
                Some(t) if target(t).is_some() => vec![t.as_str()],
                Some(t) if t.parse::<usize>().is_err() => {
                    eprintln!("no target {t}");
                    return usage();
                }
                _ => TARGETS.iter().map(|(n, _)| *n).collect(),
            };
            let numbers: Vec<u64> = args[1..].iter().filter_map(|a| a.parse().ok()).collect();
            let iterations = numbers.first().copied().unwrap_or(5000) as usize;
            let seed = numbers.get(1).copied().unwrap_or(1);
            for name in names {
                let start = Instant::now();
                let t = target(name).expect("listed");
                let n = smoke::smoke(name, t, iterations, seed);
                println!("{name}: {n} inputs in {:.2?}", start.elapsed());
            }
        }
        Some("seeds") => {
            let root = args
                .get(1)
                .map(PathBuf::from)
                .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds"));
            for (name, _) in TARGETS {
                let dir = root.join(name);
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(&dir).expect("create the seed directory");
                for (file, bytes) in seeds::seeds(name) {
                    std::fs::write(dir.join(file), bytes).expect("write a seed");
                }
                println!("{}", dir.display());
            }
        }
        _ => return usage(),
    }
    ExitCode::SUCCESS
}
