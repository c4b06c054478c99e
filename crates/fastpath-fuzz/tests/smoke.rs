//! Every fuzz target over its committed seed corpus and a few thousand seeded random inputs, in
//! `cargo test`. `FASTPATH_FUZZ_ITERATIONS` changes the number (the default keeps the whole run to a
//! few seconds in release).

use fastpath_fuzz::{seeds, smoke, target, TARGETS};

fn iterations(default: usize) -> usize {
    std::env::var("FASTPATH_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run(name: &str, default: usize) {
    let t = target(name).expect("a target");
    let n = smoke::smoke(name, t, iterations(default), 1);
    assert!(n > 0);
}

#[test]
fn ipv4() {
    run("ipv4", 5000);
}

#[test]
fn udp() {
    run("udp", 5000);
}

#[test]
fn icmpv4() {
    run("icmpv4", 5000);
}

#[test]
fn icmp_quoted() {
    run("icmp_quoted", 5000);
}

#[test]
fn ipv6() {
    run("ipv6", 5000);
}

#[test]
fn icmpv6() {
    run("icmpv6", 5000);
}

#[test]
fn checksum() {
    run("checksum", 5000);
}

#[test]
fn reassembly() {
    run("reassembly", 5000);
}

#[test]
fn reassembly_ipv6() {
    run("reassembly_ipv6", 5000);
}

#[test]
fn demux() {
    run("demux", 5000);
}

#[test]
fn stack() {
    run("stack", 5000);
}

#[test]
fn tcp() {
    run("tcp", 3000);
}

#[test]
fn amplification() {
    run("amplification", 1500);
}

#[test]
fn socks5() {
    run("socks5", 5000);
}

#[test]
fn http_connect() {
    run("http_connect", 5000);
}

#[test]
fn dns() {
    run("dns", 5000);
}

#[test]
fn ethernet() {
    run("ethernet", 5000);
}

#[test]
fn arp() {
    run("arp", 5000);
}

#[test]
fn neighbor() {
    run("neighbor", 5000);
}

#[test]
fn lan() {
    run("lan", 5000);
}

#[test]
fn every_target_has_a_test_and_seeds() {
    for (name, _) in TARGETS {
        assert!(
            !smoke::read_corpus(&smoke::seed_dir(name)).is_empty(),
            "no seeds for {name}"
        );
    }
    assert_eq!(TARGETS.len(), 20, "a new target needs its test here");
}

/// The committed seeds are what `seeds.rs` makes: after changing a target's input format, run
/// `cargo run -p fastpath-fuzz -- seeds` and commit the result.
#[test]
fn committed_seeds_are_current() {
    for (name, _) in TARGETS {
        let committed = smoke::read_corpus(&smoke::seed_dir(name));
        let mut made: Vec<(String, Vec<u8>)> = seeds::seeds(name)
            .into_iter()
            .map(|(n, b)| (n.to_string(), b))
            .collect();
        made.sort();
        assert!(
            committed == made,
            "seeds/{name} is stale: run `cargo run -p fastpath-fuzz -- seeds`"
        );
    }
}

/// The `stack` seeds do what their names say, so the campaign starts from deep paths.
#[test]
fn stack_seeds_reach_what_they_are_named_for() {
    use fastpath::DropReason;
    let seeds: std::collections::HashMap<_, _> = seeds::seeds("stack").into_iter().collect();
    let run = |name: &str| fastpath_fuzz::stack::run(&seeds[name]);
    let c = run("udp_delivered");
    assert_eq!((c.udp.in_datagrams, c.udp.in_read), (2, 2), "{c}");
    let c = run("echo");
    assert_eq!(c.icmp.out_echo_reps, 1, "{c}");
    let c = run("fragments");
    assert_eq!((c.ip.reasm_oks, c.udp.in_read), (1, 1), "{c}");
    let c = run("port_unreachable_and_error");
    assert_eq!(
        (c.icmp.out_dest_unreachs, c.icmp.in_dest_unreachs),
        (1, 1),
        "{c}"
    );
    let c = run("small_limits_flood");
    assert!(c.drops.get(DropReason::ReassemblyEvicted) > 0, "{c}");
    assert!(c.drops.get(DropReason::UdpQueueFull) > 0, "{c}");
    let c = run("offload_metadata");
    assert_eq!(c.udp.in_checksum_offloaded, 2, "{c}");
    let c = run("sends");
    assert!(c.udp.out_datagrams >= 3 && c.ip.frag_oks >= 1, "{c}");
    let c = run("raw");
    assert_eq!(c.udp.in_datagrams, 1, "{c}");
}
