#!/bin/sh
# Compares a run's table (run.sh's $PD_OUT) with the scripts expected to pass:
#
#   crates/fastpath-packetdrill/check.sh EXPECTED.txt RESULTS.tsv
#
# Fails, naming them, when a script expected to pass did not; prints the scripts that pass but are
# not listed yet (add them to EXPECTED.txt: they are then kept passing).
set -eu
expected=$1
results=$2
status=0
while IFS= read -r script; do
    [ -n "$script" ] || continue
    result=$(awk -F'\t' -v s="$script" '$1 == s { print $2 " " $3 }' "$results")
    case $result in
        pass*) ;;
        *) echo "regressed: $script: ${result:-not run}"; status=1 ;;
    esac
done < "$expected"
awk -F'\t' '$2 == "pass" { print $1 }' "$results" | while IFS= read -r script; do
    grep -qxF "$script" "$expected" || echo "newly passing (add it to $expected): $script"
done
passed=$(awk -F'\t' '$2 == "pass"' "$results" | wc -l)
total=$(wc -l < "$results")
echo "$passed of $total scripts pass; $(grep -c . "$expected") are expected to"
exit $status
