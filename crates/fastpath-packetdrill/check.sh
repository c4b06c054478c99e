#!/bin/sh
# Compares a run's table (run.sh's $PD_OUT) with the scripts expected to pass:
#
#   crates/fastpath-packetdrill/check.sh EXPECTED.txt RESULTS.tsv
#
# Fails, naming them, when a script expected to pass did not; prints the scripts that pass but are
# not listed yet (add them to EXPECTED.txt: they are then kept passing).
#
# A script expected to pass that failed is run twice more on its own (run.sh, with $PD_FAMILY)
# before it counts as regressed: packetdrill runs a blocking call on a thread of its own, and on a
# loaded machine its bookkeeping can lag the shim's virtual clock (a script once found no socket
# for its code block). One that passes again is reported as flaky, not failed.
set -eu
expected=$1
results=$2
here=$(dirname "$0")
status=0
while IFS= read -r script; do
    [ -n "$script" ] || continue
    result=$(awk -F'\t' -v s="$script" '$1 == s { print $2 " " $3 }' "$results")
    case $result in
        pass*) continue ;;
    esac
    again=
    for try in 1 2; do
        retry=$(mktemp)
        if PD_OUT=$retry "$here/run.sh" "$script" >/dev/null 2>&1 \
            && awk -F'\t' '$2 == "pass"' "$retry" | grep -q .; then
            again=$try
        fi
        rm -f "$retry"
        [ -z "$again" ] || break
    done
    if [ -n "$again" ]; then
        echo "flaky: $script: ${result:-not run}; passed when run again ($again)"
    else
        echo "regressed: $script: ${result:-not run}"
        status=1
    fi
done < "$expected"
awk -F'\t' '$2 == "pass" { print $1 }' "$results" | while IFS= read -r script; do
    grep -qxF "$script" "$expected" || echo "newly passing (add it to $expected): $script"
done
passed=$(awk -F'\t' '$2 == "pass"' "$results" | wc -l)
total=$(wc -l < "$results")
echo "$passed of $total scripts pass; $(grep -c . "$expected") are expected to"
exit $status
