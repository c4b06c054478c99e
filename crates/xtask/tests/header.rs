//! The committed C header is what cbindgen makes of the FFI crate now: after changing its API, run
//! `cargo xtask header` and commit the result.

#[test]
fn the_committed_header_is_current() {
    let made = xtask::header().unwrap();
    let committed = std::fs::read_to_string(xtask::header_path()).unwrap_or_default();
    assert!(
        made == committed,
        "crates/fastpath-tunnel-ffi/include/fastpath_tunnel.h is stale: run `cargo xtask header`"
    );
}
