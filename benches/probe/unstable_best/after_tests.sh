#!/usr/bin/env bash
# Whether the GPU tests leave a machine on which two-kernel bests lose their cold time:
# the seed-11 best of 2953 x 379 x 1013 NT of 2026-11-30 (slow on some machines after
# tunes) and a best of the same shape from a fresh machine, each run cold (the L2
# overwritten before every timed run, as in tuning) and warm by fresh `tessel run`
# processes, with cublasLt in the same process; before and after the GPU tests
# (`.gpu/tests/gpu`, built by `gpu-bundle --test gpu`), with the clocks and the reasons
# they are held. Run from the repository root on the GPU machine:
#
#   bash benches/probe/unstable_best/after_tests.sh OUT
set -u
out=$1
bin=${TESSEL_BIN:-./.gpu/tessel}
here=$(dirname "$0")
w=matmul:m=2953,n=379,k=1013,layout=nt
mkdir -p "$out"
runs() {
  local s
  for s in "$here/seed11_2026_11_30.sched" "$here/fresh_best_2026_11_30b.json"; do
    for mode in "" "" --warm; do
      echo "  $(basename "$s") ${mode:-cold}: $("$bin" run $w --schedule "$s" --target cuda --compare $mode 2>&1 | grep -E '^(speed|peer)' | tr '\n' ' ' | sed 's/(fastest of its heuristic.s candidates)//')"
    done
  done
  nvidia-smi --query-gpu=temperature.gpu,clocks.sm,clocks.mem,power.draw,memory.used,clocks_throttle_reasons.active --format=csv,noheader
}
echo "fresh:"; runs
TESSEL_GPU=1 ./.gpu/tests/gpu --test-threads=1 >"$out/gpu_tests.txt" 2>&1
echo "after the GPU tests ($(grep -E '^test result' "$out/gpu_tests.txt")):"; runs
