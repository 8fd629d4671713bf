#!/usr/bin/env bash
# Transposing fetches staged in registers (R) against the 4-byte cp.async transposing
# fetch (T) and operands transposed by kernels of their own (K), in the ceiling's
# hand-picked schedules (benches/gemm_ceiling.py), for the layouts with an operand stored
# by rows of the reduction; each timed beside cublasLt by `tessel run --compare`.
#
#   benches/probe/register_fetch/ceiling.sh OUT [N...]     (default N: 1024 2048 4096)
set -u
out=$1
shift
sizes=${*:-1024 2048 4096}
here=$(cd "$(dirname "$0")/../.." && pwd)
for layout in nn nt tt; do
  # shellcheck disable=SC2086
  LAYOUT=$layout ONLY='_(T-|-T|TT|R-|-R|RR|K-|-K|KK)_.*k32i16_s[23]\.sched$' \
    "$here/gemm_ceiling.sh" "$out/$layout" $sizes
done
