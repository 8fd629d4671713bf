#!/usr/bin/env bash
# Why a tuned kernel's warps wait, beside cublasLt's for the same GEMM: Nsight Compute's
# stall reasons (cycles a warp waits per issued instruction, by reason), warps a
# scheduler and issue activity, on the kernels named main_kernel* of `tessel run W
# --schedule SCHED` and on the cuBLAS kernels `--compare` launches. Prints per distinct
# kernel (the three longest of each run) its launch, duration and top seven reasons.
#
#   benches/stall_reasons.sh OUT WORKLOAD SCHED
#   e.g. CUDA_VISIBLE_DEVICES=1 benches/stall_reasons.sh /tmp/st matmul:m=3779,n=941,k=787,layout=nn best.sched
#
# NCU_EXTRA (metric names, comma-separated) are collected too and printed per kernel.
set -u
out=$1 w=$2 sched=$3
bin=${TESSEL_BIN:-./.gpu/tessel}
mkdir -p "$out"
tag=$(printf '%s' "$w" | tr ':,=/' '____')
m='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
m+=,smsp__warps_active.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active
m+=,gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread
m+=${NCU_EXTRA:+,$NCU_EXTRA}
source "$(dirname "$0")/ncu_pair.sh"
ncu_pair "$bin" "$w" "$sched" "$m" 6 12 "$out/$tag.tessel.csv" "$out/$tag.peer.csv"
PYTHONPATH="$(dirname "$0")" python3 - "${NCU_EXTRA:-}" "$out/$tag.tessel.csv" "$out/$tag.peer.csv" <<'PY'
import sys
from ncu_csv import kernels, number as num
extra = [e for e in sys.argv[1].split(",") if e]
for path in sys.argv[2:]:
    shapes = kernels(path, 50)
    if shapes is None:
        continue
    first = {key: ms[0] for key, ms in shapes.items()}
    longest = sorted(first.items(), key=lambda kv: -num(kv[1].get("gpu__time_duration.sum", "0")))
    for (name, grid, block), m in longest[:3]:
        stalls = {k.replace("smsp__average_warps_issue_stalled_", "").replace("_per_issue_active.ratio", ""): num(v)
                  for k, v in m.items() if "stalled" in k}
        top = sorted(stalls.items(), key=lambda kv: -kv[1])[:7]
        print(f"  {name[:40]} grid {grid} block {block} regs {m.get('launch__registers_per_thread')} "
              f"duration {m.get('gpu__time_duration.sum')} ns, warps a scheduler "
              f"{m.get('smsp__warps_active.avg.per_cycle_active')}, issue active "
              f"{m.get('smsp__issue_active.avg.pct_of_peak_sustained_active')}%")
        print("     ", ", ".join(f"{k} {v:.2f}" for k, v in top))
        if extra:
            print("     ", ", ".join(f"{e} {m.get(e)}" for e in extra))
PY
