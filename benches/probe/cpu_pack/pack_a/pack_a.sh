#!/usr/bin/env bash
# Does packing A help the 1024^3 CPU best (issue 16)? best_1024.sched (the best of a
# 128-trial tune on the AVX2 development VM, 2026-11-30, benches/cpu_blas.sh) as tessel
# emits it, against the same with A packed by pack_a.py; both built with the flags tessel
# uses on an AVX2 host and called alternately from bench.c, warm, PASSES times on each
# thread count.
#   benches/probe/cpu_pack/pack_a/pack_a.sh [PASSES] [THREADS...]   (default 4; 1 2)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${TESSEL_BIN:-./target/release/tessel}
passes=${1:-4}
shift $(( $# > 0 ? 1 : 0 ))
threads=("${@:-1 2}")
dir=$(mktemp -d)
"$bin" show matmul:1024x1024x1024 --schedule "$here/best_1024.sched" --emit c >"$dir/k.c"
python3 "$here/pack_a.py" "$dir/k.c" "$dir/orig.c" "$dir/pack.c"
flags="-O3 -mavx2 -mfma -ffp-contract=fast -fopenmp -std=c11"
for f in orig pack; do cc $flags -c "$dir/$f.c" -o "$dir/$f.o"; done
cc $flags "$here/bench.c" "$dir/orig.o" "$dir/pack.o" -o "$dir/bench" -lm
grep -m1 'model name' /proc/cpuinfo
for p in $(seq "$passes"); do
  for t in ${threads[*]}; do OMP_NUM_THREADS=$t "$dir/bench" 40; done
done
rm -rf "$dir"
