#!/usr/bin/env bash
# The shared-memory loads NVRTC makes of the fp32 ceiling's 2048^3 kernels (benches/RESULTS.md,
# 2026-12-02, "The compute's shared reads with the staged tile's steps rolled"): for every
# 128 x 128, k32i16 variant of benches/gemm_ceiling.py's layout_variants (all four layouts),
# the counts of `ld.shared.f32`, `ld.shared.v4` and `fma.rn` in its PTX; then the TT kernel
# that transposes B in its fetch (tests/golden/tt_transposing_fetch_2048.sched) as it is and
# with the loop over a staged tile's steps (`r0_1`) unrolled. Needs NVRTC, not a GPU.
#
#   eval "$(../shared/tools/nvrtc-local)"; benches/probe/tile_steps/ptx_loads.sh
set -u
bin=${TESSEL_BIN:-target/release/tessel}
tmp=$(mktemp -d)
python3 - "$tmp" <<'PY'
import os, sys
sys.path.insert(0, "benches")
import gemm_ceiling as g
for layout in ("nn", "nt", "tn", "tt"):
    for name, args in g.layout_variants(2048, layout).items():
        if "128x128" in name and "k32i16" in name and not name.endswith("_vl"):
            open(os.path.join(sys.argv[1], f"{name}.sched"), "w").write(g.schedule(**args))
PY
count() {
  "$bin" build "$1" --schedule "$2" --emit ptx 2>/dev/null >"$tmp/p.ptx" || { echo "build failed"; return; }
  echo "ld.shared.f32 $(grep -c 'ld.shared.f32' "$tmp/p.ptx")  ld.shared.v4 $(grep -c 'ld.shared.v4' "$tmp/p.ptx")  fma $(grep -c 'fma.rn' "$tmp/p.ptx")"
}
for f in "$tmp"/*.sched; do
  n=$(basename "$f" .sched)
  echo "$n | $(count "matmul:2048x2048x2048,layout=${n:0:2}" "$f")"
done
golden=tests/golden/tt_transposing_fetch_2048.sched
echo "golden tt, r0_1 rolled | $(count matmul:2048x2048x2048,layout=tt "$golden")"
{ cat "$golden"; echo 'annotate(r0_1, key="pragma_auto_unroll_max_step", value=512)'; } >"$tmp/unrolled.sched"
echo "golden tt, r0_1 unrolled | $(count matmul:2048x2048x2048,layout=tt "$tmp/unrolled.sched")"
rm -rf "$tmp"
