#!/usr/bin/env bash
# Request/response on one connection while IDLE other connections are held open, against
# `fastpath serve`'s TCP echo: how a server's pass scales with connections that have nothing to do.
#   sudo docs/experiments/idle_rr.sh FASTPATH_BINARY IDLE [SECONDS]
# Starts `serve` (namespace fp, TUN fp0, 10.7.0.2), opens IDLE connections from the kernel's side
# with Python, then times 64-byte transactions on one more for SECONDS (default 3), one at a time.
# The client is Python, so the rate is its pace when the server keeps up.
set -euo pipefail
bin=$1
idle=$2
secs=${3:-3}
"$bin" serve --duration 120 >/dev/null 2>&1 &
serve=$!
trap 'kill -INT $serve 2>/dev/null; wait $serve 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    ip netns exec fp ip -4 addr 2>/dev/null | grep -q 10.7.0.1 && break
    sleep 0.1
done
sleep 0.5
ip netns exec fp python3 - "$idle" "$secs" <<'PY'
import socket, sys, time
idle, secs = int(sys.argv[1]), float(sys.argv[2])
held = [socket.create_connection(("10.7.0.2", 7), timeout=5) for _ in range(idle)]
c = socket.create_connection(("10.7.0.2", 7), timeout=5)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
msg = b"x" * 64
def transaction():
    c.sendall(msg)
    got = 0
    while got < len(msg):
        got += len(c.recv(len(msg) - got))
for _ in range(100):
    transaction()
n, start = 0, time.monotonic()
while time.monotonic() - start < secs:
    transaction()
    n += 1
print(f"{idle} idle connections: {n / (time.monotonic() - start):.0f} transactions/s")
PY
