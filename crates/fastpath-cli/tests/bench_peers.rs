//! `fastpath bench peers --quick --json -`: the rows have the promised shape and sane values. The
//! figures themselves (fastpath's ratios over the peers) are reported, not asserted: they depend on the
//! machine and its load.

use std::process::Command;

use serde_json::Value;

/// Runs the quick experiment and returns its JSON rows (standard output holds them alone; the table
/// goes to standard error).
fn quick_rows() -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(["bench", "peers", "--quick", "--json", "-"])
        .output()
        .expect("run fastpath");
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "fastpath bench peers failed:\n{stdout}\n{stderr}"
    );
    assert!(stderr.contains("fp/smoltcp b32"), "no table:\n{stderr}");
    assert!(
        stderr.contains("IPv6's datagrams/s over IPv4's"),
        "no IPv6 comparison:\n{stderr}"
    );
    match serde_json::from_str(&stdout).expect("JSON alone on standard output") {
        Value::Array(rows) => rows,
        other => panic!("expected an array, got {other}"),
    }
}

fn field<'a>(row: &'a Value, name: &str) -> &'a Value {
    row.get(name)
        .unwrap_or_else(|| panic!("row without {name}: {row}"))
}

fn number(row: &Value, name: &str) -> f64 {
    field(row, name)
        .as_f64()
        .unwrap_or_else(|| panic!("{name} is not a number: {row}"))
}

fn integer(row: &Value, name: &str) -> u64 {
    field(row, name)
        .as_u64()
        .unwrap_or_else(|| panic!("{name} is not an integer: {row}"))
}

#[test]
fn quick_run_has_every_stack_size_sockets_and_burst() {
    let rows = quick_rows();
    let expected: &[(&str, &[u64])] = &[
        ("fastpath", &[1, 32]),
        ("smoltcp", &[1, 32]),
        ("linux", &[1]),
    ];
    // Both families, three sizes, two socket counts.
    let want: usize = 2 * 3 * 2 * expected.iter().map(|(_, b)| b.len()).sum::<usize>();
    assert_eq!(rows.len(), want, "rows: {rows:#?}");
    for family in [4, 6] {
        for (stack, bursts) in expected {
            for size in [64, 512, 1472] {
                for sockets in [2, 400] {
                    for &burst in *bursts {
                        let matching: Vec<&Value> = rows
                            .iter()
                            .filter(|r| {
                                field(r, "stack").as_str() == Some(stack)
                                    && integer(r, "family") == family
                                    && integer(r, "size") == size
                                    && integer(r, "sockets") == sockets
                                    && integer(r, "burst") == burst
                            })
                            .collect();
                        assert_eq!(
                        matching.len(),
                        1,
                        "IPv{family} {stack} {size} B {sockets} sockets burst {burst}: {matching:?}"
                    );
                        let row = matching[0];
                        let rate = number(row, "datagrams_per_s");
                        let ns = number(row, "ns_per_datagram");
                        let ratio = number(row, "ratio_fastpath_over_this");
                        assert!(rate.is_finite() && rate > 0.0, "{row}");
                        assert!(ns.is_finite() && ns > 0.0, "{row}");
                        assert!((rate * ns / 1e9 - 1.0).abs() < 1e-6, "{row}");
                        assert!(ratio.is_finite() && ratio > 0.0, "{row}");
                        let (sent, received) = (integer(row, "sent"), integer(row, "received"));
                        assert!(sent > 0, "{row}");
                        if *stack == "linux" {
                            assert!(received > 0 && received <= sent, "{row}");
                        } else {
                            assert_eq!(received, sent, "{stack} lost datagrams: {row}");
                        }
                        let reference = rows
                            .iter()
                            .find(|r| {
                                field(r, "stack").as_str() == Some("fastpath")
                                    && integer(r, "family") == family
                                    && integer(r, "size") == size
                                    && integer(r, "sockets") == sockets
                                    && integer(r, "burst") == burst
                            })
                            .expect("fastpath row with the same size, sockets and burst");
                        let want = number(reference, "datagrams_per_s") / rate;
                        assert!((ratio / want - 1.0).abs() < 1e-9, "{row} vs {reference}");
                    }
                }
            }
        }
    }
}
