#!/usr/bin/env bash
# Two tessel binaries A/B'd on the host CPU (a change of the CPU sketches): each workload
# tuned by each binary into a fresh database (TRIALS trials, seed 1, THREADS threads),
# then the two bests run again in PASSES alternating pairs (`tessel run`, its median),
# so that a shared machine's load lands on both. Prints per workload the tunes' bests,
# each pass's medians and the median ratio B / A (> 1: B faster); writes OUT/table.txt.
#
#   benches/cpu_ab.sh OUT TRIALS BIN_A BIN_B WORKLOAD...
#
# SPACE_A / SPACE_B name a search-space file each arm tunes with (`--space`; default the
# embedded one): one binary, a rule with and without it, e.g.
#   benches/space_without.py search_spaces/cpu.toml lane_reduction >/tmp/a.toml
#   SPACE_A=/tmp/a.toml benches/cpu_ab.sh /tmp/ab 64 target/release/tessel target/release/tessel W...
#   e.g. git stash; cargo build --release; cp target/release/tessel /tmp/tessel-a
#        git stash pop; cargo build --release
#        PASSES=3 benches/cpu_ab.sh /tmp/ab 96 /tmp/tessel-a target/release/tessel \
#          conv2d_nchw:n=1,c=128,h=28,w=28,k=128,r=3,s=3,stride=2,pad=1
set -u
out=$1 trials=$2 bin_a=$3 bin_b=$4
shift 4
threads=${THREADS:-$(nproc)} passes=${PASSES:-3}
mkdir -p "$out"
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
ms() { # binary workload schedule -> median milliseconds of one run
  "$1" run "$2" --target cpu --schedule "$3" --threads "$threads" 2>&1 |
    awk '/^latency/ {v = $3; if ($4 == "us") v /= 1000; print v}'
}
for w in "$@"; do
  tag=$(echo "$w" | tr -c 'a-zA-Z0-9\n' '_')
  for arm in a b; do
    bin=$bin_a space=${SPACE_A:-}
    [[ $arm == b ]] && bin=$bin_b space=${SPACE_B:-}
    db=$out/$tag.$arm.sqlite
    rm -f "$db"
    "$bin" tune "$w" --target cpu --trials "$trials" --seed 1 --threads "$threads" --db "$db" \
      ${space:+--space "$space"} >"$out/$tag.$arm.tune.txt" 2>&1
    "$bin" best "$w" --target cpu --db "$db" --emit trace >"$out/$tag.$arm.sched" 2>/dev/null
  done
  ra=() rb=()
  for ((i = 0; i < passes; i++)); do
    ra+=("$(ms "$bin_a" "$w" "$out/$tag.a.sched")")
    rb+=("$(ms "$bin_b" "$w" "$out/$tag.b.sched")")
  done
  a=$(printf '%s\n' "${ra[@]}" | median) b=$(printf '%s\n' "${rb[@]}" | median)
  echo "$w | A best $(grep -m1 '^best' "$out/$tag.a.tune.txt" | cut -c11-) | B best $(grep -m1 '^best' "$out/$tag.b.tune.txt" | cut -c11-) | A ms ${ra[*]} | B ms ${rb[*]} | B / A $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", a / b}')"
done | tee "$out/table.txt"
