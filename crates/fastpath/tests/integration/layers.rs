//! The library's modules form layers, and no module imports one above it (so there is no import
//! cycle): this test reads every source file of the crate and checks each `crate::NAME` it uses in
//! code (comments and doc links aside) against the order below.

use std::collections::BTreeMap;
use std::path::Path;

/// The layers, bottom up. A module may use modules of lower layers only (and itself).
const LAYERS: &[&[&str]] = &[
    &["time", "rng", "secret", "stats", "addr", "instrument"],
    &["checksum", "buf", "demux", "route", "pmtu"],
    &["wire", "config"],
    &["link", "reassembly", "ethernet"],
    &["ip"],
    &["ipv4", "ipv6"],
    &["icmp", "icmpv6"],
    &["transport"],
    &["udp", "tcp"],
    &["stack"],
    &["api"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The code of a Rust source file with comments removed (line comments, doc comments and block
/// comments), so doc links do not count as uses.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut in_block = 0;
    for line in text.lines() {
        let mut rest = line;
        let mut kept = String::new();
        loop {
            if in_block > 0 {
                match rest.find("*/") {
                    Some(i) => {
                        in_block -= 1;
                        rest = &rest[i + 2..];
                    }
                    None => break,
                }
            } else {
                let line_comment = rest.find("//");
                let block = rest.find("/*");
                match (line_comment, block) {
                    (Some(l), Some(b)) if b < l => {
                        kept.push_str(&rest[..b]);
                        in_block += 1;
                        rest = &rest[b + 2..];
                    }
                    (Some(l), _) => {
                        kept.push_str(&rest[..l]);
                        break;
                    }
                    (None, Some(b)) => {
                        kept.push_str(&rest[..b]);
                        in_block += 1;
                        rest = &rest[b + 2..];
                    }
                    (None, None) => {
                        kept.push_str(rest);
                        break;
                    }
                }
            }
        }
        out.push_str(&kept);
        out.push('\n');
    }
    out
}

/// Every `crate::NAME` in `code`.
fn uses(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        // `$crate::` in macros and `crate::{a, b}` lists.
        if after.starts_with('{') {
            let list = &after[1..after.find('}').unwrap_or(after.len())];
            for item in list.split(',') {
                let item = item.trim();
                let head: String = item
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !head.is_empty() {
                    found.push(head);
                }
            }
        } else if !name.is_empty() {
            found.push(name);
        }
        rest = after;
    }
    found
}

fn visit(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            visit(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

#[test]
fn no_module_imports_one_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    visit(&src, &mut files);
    assert!(files.len() > 30, "found only {} files", files.len());
    let mut violations = BTreeMap::new();
    for file in &files {
        let rel = file.strip_prefix(&src).expect("under src");
        let first = rel
            .components()
            .next()
            .expect("a component")
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if first == "lib" {
            continue;
        }
        let Some(own) = layer_of(&first) else {
            panic!(
                "module `{first}` ({}) is in no layer: add it to LAYERS",
                rel.display()
            );
        };
        let code = code_of(&std::fs::read_to_string(file).expect("read"));
        for used in uses(&code) {
            if used == first {
                continue;
            }
            let Some(theirs) = layer_of(&used) else {
                panic!(
                    "{} uses `crate::{used}`, which is in no layer",
                    rel.display()
                );
            };
            if theirs >= own {
                violations
                    .entry(rel.display().to_string())
                    .or_insert_with(Vec::new)
                    .push(used);
            }
        }
    }
    assert!(
        violations.is_empty(),
        "modules that use a module of their own layer or above: {violations:#?}"
    );
}

#[test]
fn the_checker_sees_through_comments_and_lists() {
    let code = code_of("use crate::a; // crate::b\n/// [x](crate::c)\nfn f() { crate::d::g(); } /* crate::e */\nuse crate::{f, g::h};");
    assert_eq!(uses(&code), ["a", "d", "f", "g"]);
}
