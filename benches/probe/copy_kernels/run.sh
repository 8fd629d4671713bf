#!/usr/bin/env bash
# How fast a tuned best's operand copies (kernels of their own that store an FFMA GEMM's
# operands reduction first) run each way the space offers: the best as tuned, three
# times, and each variant `examples/staging_variants.rs` grew from it (one copy's way and
# tile changed, everything else as tuned), twice; `tessel run` medians (L2 flushed, the
# checked result), so the differences are the copies'. Then Nsight Compute's durations
# of the kernels of a few (`benches/kernel_times.sh`).
#
#   bash benches/probe/copy_kernels/run.sh OUT
#   (variants: cargo run --release --example staging_variants -- W SCHED DIR)
set -u
out=$1
here=$(cd "$(dirname "$0")" && pwd)
bin=${TESSEL_BIN:-./.gpu/tessel}
mkdir -p "$out"
sets=(
  "nt2953 matmul:m=2953,n=379,k=1013,layout=nt $here/../unstable_best/seed11_2026_11_30.sched"
  "nn3779 matmul:m=3779,n=941,k=787,layout=nn $here/../weak_gemm_variants/nn3779_best.sched"
  "nn1804 matmul:m=1804,n=846,k=1710,layout=nn $here/../register_fetch/tk_1804x846x1710_nn.sched"
  "nn1556 matmul:m=1556,n=3953,k=2198,layout=nn $here/../register_fetch/tk_1556x3953x2198_nn.sched"
)
lat() { "$bin" run "$1" --schedule "$2" --target cuda 2>&1 | awk '/^check/ && $2 != "ok:" {print "CHECK-FAILED"} /^latency/ {print $3}' | tr '\n' ' '; }
for s in "${sets[@]}"; do
  set -- $s
  echo "$1 as tuned: $(lat "$2" "$3") $(lat "$2" "$3") $(lat "$2" "$3")"
  for v in "$here/$1"/*.sched; do
    echo "$1 $(basename "$v" .sched): $(lat "$2" "$v") $(lat "$2" "$v")"
  done
done | tee "$out/copies.txt"
[[ ${NCU:-1} == 1 ]] || exit 0
for pick in "nt2953 ../unstable_best/seed11_2026_11_30.sched" "nt2953 nt2953/t1_pad_global_tiled_64.sched" \
            "nn3779 ../weak_gemm_variants/nn3779_best.sched" "nn3779 nn3779/t0_pad_global_tiled_64.sched"; do
  set -- $pick
  w=$(printf '%s\n' "${sets[@]}" | awk -v t="$1" '$1 == t {print $2}')
  echo "== $1 $2"
  bash "$here/../../kernel_times.sh" "$out/ncu" "$w" "$here/$2" 2>&1 | tail -8
done | tee "$out/ncu.txt"
