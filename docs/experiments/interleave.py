#!/usr/bin/env python3
"""Wall-clock A/B of example binaries that take `N BURST` arguments (peers_profile, tcp_rr_profile):
runs each binary ROUNDS times, alternating the order every round, and prints the median nanoseconds
per unit (datagram, transaction) with each binary's speed relative to the first.

usage: interleave.py ROUNDS N BURST BINARY...
e.g.:  interleave.py 7 10000000 32 /tmp/before/peers_profile target/release/examples/peers_profile
A BINARY with spaces is a command: its first word the program, the rest arguments after N and BURST
(`'target/release/examples/peers_profile 64 6'` runs peers_profile over IPv6).
"""
import statistics
import subprocess
import sys
import time

rounds, n, burst = int(sys.argv[1]), sys.argv[2], sys.argv[3]
binaries = sys.argv[4:]
times = {b: [] for b in binaries}
for r in range(rounds):
    for b in binaries if r % 2 == 0 else binaries[::-1]:
        start = time.perf_counter()
        program, *rest = b.split()
        subprocess.run([program, n, burst, *rest], check=True)
        times[b].append((time.perf_counter() - start) * 1e9 / int(n))
base = statistics.median(times[binaries[0]])
for b in binaries:
    m = statistics.median(times[b])
    runs = " ".join(f"{x:.1f}" for x in times[b])
    print(f"{b}: median {m:.1f} ns, {base / m:.3f}x the first; runs {runs}")
