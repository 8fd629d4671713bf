#!/usr/bin/env bash
# Hardware counters of a scheduled kernel on the CUDA device, beside the peer's: Nsight
# Compute (`ncu --clock-control none`, the clocks left alone) on `tessel run W --schedule
# SCHED`, the first COUNT launches of kernels named main_kernel* (the run's reference
# kernels come first, then the scheduled ones: read the grid to tell them apart), and
# with PEER=conv the cuDNN kernel PyTorch picks for a conv2d spec (of the spec's dtype, benchmark mode, TF32
# off, after the choice is made; channels last for an NHWC workload). Prints per kernel the time, instructions, IPC,
# occupancy, registers and the top stall; the full reports go to OUT.
#
#   benches/ncu_profile.sh OUT WORKLOAD SCHED [COUNT]
#   e.g. PEER=conv benches/ncu_profile.sh /tmp/ncu conv2d_nchw:n=8,c=25,... best.sched
set -u
out=$1 w=$2 sched=$3 count=${4:-6}
bin=${TESSEL_BIN:-./.gpu/tessel}
mkdir -p "$out"
tag=$(printf '%s' "$w" | tr ':,=/' '____')
sections=(--section SpeedOfLight --section LaunchStats --section Occupancy
  --section WarpStateStats --section InstructionStats --section ComputeWorkloadAnalysis
  --section MemoryWorkloadAnalysis --section SchedulerStats)
summary() {
  grep -E "^  [A-Za-z_0-9]+.*\(|Duration  |Executed Instructions  |Executed Ipc Active|Registers Per|Achieved Occupancy|Memory Throughput  +%|stalled" "$1" |
    sed -E 's/ +/ /g' | cut -c1-160
}
ncu --clock-control none --target-processes all -k regex:main_kernel -c "$count" "${sections[@]}" \
  "$bin" run "$w" --schedule "$sched" --target cuda >"$out/$tag.ncu.txt" 2>&1
summary "$out/$tag.ncu.txt"
if [[ ${PEER:-} == conv ]]; then
  args=$(python3 - "$w" <<'PY'
import sys
spec = sys.argv[1].split(":", 1)[1]
kv = dict(x.split("=") for x in spec.split(","))
print(" ".join(kv[k] for k in ["n", "c", "h", "w", "k", "r", "s", "stride", "pad"]
               ) + " " + kv.get("dtype", "f32") + (" nhwc" if sys.argv[1].startswith("conv2d_nhwc") else ""))
PY
)
  cat >"$out/cudnn_once.py" <<'PY'
import sys, torch
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True
n, c, h, w, k, r, s, st, p = (int(x) for x in sys.argv[1:10])
# The workload's element type (dtype=f16|bf16; f32 otherwise), as benches/cudnn_conv.py.
dtype = {"f16": torch.float16, "bf16": torch.bfloat16}.get(sys.argv[10], torch.float32)
x = torch.randn(n, c, h, w, device="cuda", dtype=dtype)
wt = torch.randn(k, c, r, s, device="cuda", dtype=dtype)
if "nhwc" in sys.argv[11:]:
    # An NHWC workload: cuDNN's channels-last kernels, as benches/cudnn_conv.py times them.
    x = x.to(memory_format=torch.channels_last)
    wt = wt.to(memory_format=torch.channels_last)
for _ in range(20):
    torch.nn.functional.conv2d(x, wt, stride=st, padding=p)
torch.cuda.synchronize()
torch.cuda.profiler.start()
torch.nn.functional.conv2d(x, wt, stride=st, padding=p)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
PY
  # shellcheck disable=SC2086
  ncu --clock-control none --profile-from-start off "${sections[@]}" \
    python3 "$out/cudnn_once.py" $args >"$out/$tag.cudnn.ncu.txt" 2>&1
  summary "$out/$tag.cudnn.ncu.txt"
fi
