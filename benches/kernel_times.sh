#!/usr/bin/env bash
# Where a scheduled workload's time goes, kernel by kernel, beside cublasLt's: Nsight
# Compute (`ncu --clock-control none`, a few metrics: duration, grid, block, registers,
# active warps, SM and DRAM throughput) on `tessel run W --schedule SCHED` (the first 40
# launches of kernels named main_kernel*: the run's reference kernel, then the scheduled
# ones, each launched several times) and on `tessel run ... --compare` for the cuBLAS
# kernels its heuristic's candidates launch. One line per distinct kernel and launch shape
# with the median duration; the CSVs go to OUT.
#
#   benches/kernel_times.sh OUT WORKLOAD SCHED
#   e.g. benches/kernel_times.sh /tmp/kt matmul:m=3779,n=941,k=787,layout=nn best.sched
set -u
out=$1 w=$2 sched=$3
bin=${TESSEL_BIN:-./.gpu/tessel}
mkdir -p "$out"
tag=$(printf '%s' "$w" | tr ':,=/' '____')
metrics=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active
metrics+=,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed
source "$(dirname "$0")/ncu_pair.sh"
ncu_pair "$bin" "$w" "$sched" "$metrics" 40 30 "$out/$tag.ncu.csv" "$out/$tag.peer.csv"
PYTHONPATH="$(dirname "$0")" python3 - "$out/$tag.ncu.csv" "$out/$tag.peer.csv" <<'PY'
import sys
from ncu_csv import kernels, number
for path in sys.argv[1:]:
    shapes = kernels(path)
    if shapes is None:
        continue
    for (name, grid, block), ms in shapes.items():
        ns = sorted(number(m["gpu__time_duration.sum"]) for m in ms)
        m = ms[0]
        print(f"  {name:60s} grid {grid:>7} block {block:>4} regs "
              f"{m['launch__registers_per_thread']:>4} launches {len(ms):3d} "
              f"median {ns[len(ns) // 2] / 1000:9.1f} us  warps active "
              f"{m['sm__warps_active.avg.pct_of_peak_sustained_active']}%  SM "
              f"{m['sm__throughput.avg.pct_of_peak_sustained_elapsed']}%  DRAM "
              f"{m['dram__throughput.avg.pct_of_peak_sustained_elapsed']}%")
PY
