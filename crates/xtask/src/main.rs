//! `cargo xtask header`: writes `crates/fastpath-tunnel-ffi/include/fastpath_tunnel.h`.

fn main() {
    let task = std::env::args().nth(1).unwrap_or_default();
    let result = match task.as_str() {
        "header" => xtask::header()
            .and_then(|h| std::fs::write(xtask::header_path(), h).map_err(|e| e.to_string())),
        _ => Err("usage: cargo xtask header".into()),
    };
    if let Err(e) = result {
        eprintln!("xtask: {e}");
        std::process::exit(1);
    }
}
