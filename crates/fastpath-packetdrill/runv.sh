#!/bin/sh
# Runs packetdrill's TCP scripts against fastpath through packetdrill's shared-object mode.
#
#   crates/fastpath-packetdrill/run.sh [SCRIPT.pkt ...]
#
# With no argument it runs every script under gtests/net/tcp/ over IPv4 (PD_FAMILY=ipv6 or
# ipv4-mapped-ipv6 for the other two variants packetdrill's run_all.py runs). It unpacks and builds
# packetdrill in $PD_DIR (default /tmp/pd, outside the repository: packetdrill is GPL) from
# $PD_TARBALL, builds the shim (cargo build -p fastpath-packetdrill), runs each script with a
# $PD_TIMEOUT-second limit, and writes a table (script, result, first error line) to $PD_OUT
# (default $PD_DIR/results.tsv) and a summary to stdout. Scripts named on the command line are paths
# relative to gtests/net/tcp/ (quoted patterns such as 'close/*.pkt' expand there) or absolute.
# $PD_SO_FLAGS adds to the shim's --so_flags (e.g. delack=40).
#
# PD_TARGET=linux runs the same scripts against this machine's kernel instead, as packetdrill's
# run_all.py does (its TUN mode, root), each script in a network namespace of its own (unshare -n),
# to record which scripts Linux passes here (expected/linux-ipv4.txt, linux-ipv6.txt).
set -eu

REPO=$(cd "$(dirname "$0")/../.." && pwd)
# packetdrill's source beside the repository's folder (../shared/packetdrill, as CI has it).
PD_TARBALL=${PD_TARBALL:-$(ls "$REPO"/../shared/packetdrill/packetdrill-*.tar.gz 2>/dev/null | head -1)}
PD_DIR=${PD_DIR:-/tmp/pd}
PD_TIMEOUT=${PD_TIMEOUT:-30}
PD_OUT=${PD_OUT:-$PD_DIR/results.tsv}
PD_FAMILY=${PD_FAMILY:-ipv4}
# The defines and addresses of packetdrill's run_all.py for each family, with the shim's own local
# address (packetdrill would otherwise pick a random one). The Fast Open cookies (TFO_COOKIE) are
# the ones Linux makes for these addresses under defaults.sh's key.
case $PD_FAMILY in
    ipv4)
        ARGS="--ip_version=ipv4 --local_ip=192.168.0.1 --remote_ip=192.0.2.1"
        ARGS="$ARGS -D TFO_COOKIE=3021b9d889017eeb -D CODE=host_unreachable"
        ARGS="$ARGS -D CMSG_LEVEL_IP=SOL_IP -D CMSG_TYPE_RECVERR=IP_RECVERR"
        FLAGS="local4=192.168.0.1"
        ;;
    ipv6)
        ARGS="--ip_version=ipv6 --mtu=1520 --local_ip=fd3d:0a0b:17d6::1 --remote_ip=fd3d:fa7b:d17d::1"
        ARGS="$ARGS -D TFO_COOKIE=c1d1e9742a47a9bc"
        ARGS="$ARGS -D CMSG_LEVEL_IP=SOL_IPV6 -D CMSG_TYPE_RECVERR=IPV6_RECVERR"
        FLAGS="local6=fd3d:a0b:17d6::1,mtu=1520"
        ;;
    ipv4-mapped-ipv6)
        ARGS="--ip_version=ipv4-mapped-ipv6 --local_ip=192.168.0.1 --remote_ip=192.0.2.1"
        ARGS="$ARGS -D TFO_COOKIE=3021b9d889017eeb -D CODE=host_unreachable"
        ARGS="$ARGS -D CMSG_LEVEL_IP=SOL_IPV6 -D CMSG_TYPE_RECVERR=IPV6_RECVERR"
        FLAGS="local4=192.168.0.1"
        ;;
    *) echo "PD_FAMILY is ipv4, ipv6 or ipv4-mapped-ipv6" >&2; exit 1 ;;
esac

PD_TARGET=${PD_TARGET:-fastpath}
case $PD_TARGET in
    fastpath) ;;
    linux)
        # run_all.py's addresses for the kernel's own run; the scripts' sysctls are real here.
        case $PD_FAMILY in
            ipv4|ipv4-mapped-ipv6)
                ARGS="$ARGS --gateway_ip=192.168.0.1 --netmask_ip=255.255.0.0" ;;
            ipv6)
                ARGS="$ARGS --gateway_ip=fd3d:0a0b:17d6:8888::1" ;;
        esac
        [ "$(id -u)" -eq 0 ] || { echo "PD_TARGET=linux needs root (packetdrill's TUN mode)" >&2; exit 1; }
        # A namespace may only pick an allowed congestion control, and the scripts pick cubic.
        ALLOWED=/proc/sys/net/ipv4/tcp_allowed_congestion_control
        SAVED=$(cat "$ALLOWED")
        case " $SAVED " in
            *" cubic "*) ;;
            *) echo "$SAVED cubic" > "$ALLOWED"; trap 'echo "$SAVED" > "$ALLOWED"' EXIT ;;
        esac
        ;;
    *) echo "PD_TARGET is fastpath or linux" >&2; exit 1 ;;
esac

BIN=$PD_DIR/gtests/net/packetdrill/packetdrill
if [ ! -x "$BIN" ]; then
    for tool in gcc make bison flex; do
        command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install -y gcc make bison flex)" >&2; exit 1; }
    done
    mkdir -p "$PD_DIR"
    tar xzf "$PD_TARBALL" -C "$PD_DIR"
    (cd "$PD_DIR/gtests/net/packetdrill" && ./configure >/dev/null && make >/dev/null)
fi

[ "$PD_TARGET" = linux ] || (cd "$REPO" && cargo build -q -p fastpath-packetdrill)
SO=$REPO/target/debug/libfastpath_packetdrill.so

# Each script runs in a network namespace of its own (unshare -n as root, with a user namespace
# otherwise), so that the sysctls its init command (common/defaults.sh) sets stay there: the shim
# reads the ones it honours (Fast Open's) from that namespace's /proc. The commands that configure
# the kernel's TUN device (tc, ethtool) have no device to act on: stand-ins take their place, as for
# the commands that read or reset the kernel's TCP state (`ip tcp_metrics`, `nstat`).
UNSHARE="unshare -n"
[ "$(id -u)" -eq 0 ] || UNSHARE="unshare -rn"
FAKE=$PD_DIR/fakebin-netns
mkdir -p "$FAKE"
for c in ethtool tc; do
    printf '#!/bin/sh\nexit 0\n' > "$FAKE/$c"
    chmod +x "$FAKE/$c"
done
# `ip tcp_metrics flush` empties the stack's Fast Open cache, which stands for the kernel's metrics:
# the stand-in leaves a file the shim takes as the signal; anything else goes to the real `ip`.
REAL_IP=$(command -v ip || echo /sbin/ip)
cat > "$FAKE/ip" <<STANDIN
#!/bin/sh
if [ "\$1" = tcp_metrics ] && [ "\$2" = flush ]; then
    : > "\$FASTPATH_PD_METRICS_FLUSHED"
    exit 0
fi
exec $REAL_IP "\$@"
STANDIN
chmod +x "$FAKE/ip"
# `nstat` prints what the kernel counted since its last call; its stand-in does the same with the
# counters the shim publishes (by nstat's names) in a file, keeping what it showed beside it.
cat > "$FAKE/nstat" <<'STANDIN'
#!/bin/sh
seen="$FASTPATH_PD_NSTAT.seen"
echo "#kernel"
[ -f "$FASTPATH_PD_NSTAT" ] || exit 0
while read -r name value; do
    before=$(awk -v n="$name" '$1 == n { print $2 }' "$seen" 2>/dev/null)
    delta=$((value - ${before:-0}))
    [ "$delta" -eq 0 ] || printf '%-32s %-14d %s\n' "$name" "$delta" 0.0
done < "$FASTPATH_PD_NSTAT"
cp "$FASTPATH_PD_NSTAT" "$seen"
STANDIN
chmod +x "$FAKE/nstat"
FLUSHED=$(mktemp -u "${TMPDIR:-/tmp}/fastpath-pd-flushed.XXXXXX")
NSTAT=$(mktemp -u "${TMPDIR:-/tmp}/fastpath-pd-nstat.XXXXXX")
trap 'rm -f "$FLUSHED" "$NSTAT" "$NSTAT.seen"' EXIT

SUITE=$PD_DIR/gtests/net/tcp
if [ $# -eq 0 ]; then
    set -- $(cd "$SUITE" && find . -name '*.pkt' | sed 's|^\./||' | sort)
else
    # Patterns (quoted, so the caller's shell leaves them) expand in the suite's folder.
    set -- $(cd "$SUITE" && for a in "$@"; do for f in $a; do echo "$f"; done; done)
fi

: > "$PD_OUT"
pass=0
fail=0
for s in "$@"; do
    case $s in /*) path=$s ;; *) path=$SUITE/$s ;; esac
    # Scripts for one family only say so in their names.
    case $PD_FAMILY:$s in ipv4*:*v6*|ipv6:*v4*) continue ;; esac
    dir=$(dirname "$path")
    if [ "$PD_TARGET" = linux ]; then
        # The kernel runs in real time: a timing error may be this machine's load, so a failing
        # script gets two more tries.
        for try in 1 2 3; do
            log=$(cd "$dir" && timeout "$PD_TIMEOUT" unshare -n sh -c \
                'ip link set lo up; exec "$@"' sh "$BIN" --send_omit_free $ARGS \
                "$(basename "$path")" 2>&1) && rc=0 || rc=$?
            [ $rc -ne 0 ] || break
        done
        log=$(printf '%s\n' "$log" | { grep -v '^sysctl: ' || true; }); printf "%s\n" "$log" >&2
    else
        # The shim, preloaded too: the scripts' Python blocks read TCP_INFO with the C library's
        # getsockopt, which the preloaded copy answers for the shim's descriptors.
        rm -f "$FLUSHED" "$NSTAT" "$NSTAT.seen"
        log=$(cd "$dir" && PATH=$FAKE:$PATH timeout "$PD_TIMEOUT" $UNSHARE env LD_PRELOAD="$SO" \
            FASTPATH_PD_METRICS_FLUSHED="$FLUSHED" FASTPATH_PD_NSTAT="$NSTAT" "$BIN" \
            --so_filename="$SO" --so_flags="$FLAGS${PD_SO_FLAGS:+,$PD_SO_FLAGS}" $ARGS \
            "$(basename "$path")" 2>&1) && rc=0 || rc=$?
        log=$(printf '%s\n' "$log" | { grep -v '^sysctl: ' || true; }); printf "%s\n" "$log" >&2
    fi
    if [ $rc -eq 0 ]; then
        result=pass
        first=
        pass=$((pass + 1))
    else
        result=fail
        [ $rc -eq 124 ] && result=timeout
        first=$(printf '%s\n' "$log" | grep -v '^$' | head -1 | tr '\t' ' ')
        fail=$((fail + 1))
    fi
    printf '%s\t%s\t%s\n' "$s" "$result" "$first" >> "$PD_OUT"
done
column -t -s "$(printf '\t')" "$PD_OUT" 2>/dev/null | cut -c1-200 || cat "$PD_OUT"
echo "passed $pass of $((pass + fail)); table in $PD_OUT"
