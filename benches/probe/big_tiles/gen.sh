#!/usr/bin/env bash
# Tuned bests of three mid-size NN GEMMs (64-row tiles, 32 outputs a thread) edited:
#   <tag>_16x8 / _8x8: thread tiles of cuBLAS's SIMT shape, 128 x 128 blocks, 16 x 8
#     outputs a thread in 4 x 4 pieces (128 threads, 4 x 2 virtual threads) or 8 x 8
#     (256 threads, 2 x 2), A's fetch in float4 (A stored reduction first by a kernel),
#     B's fetch as tuned (one float a copy: its rows, 941 / 3953 / 846 floats, are no
#     whole vectors);
#   <tag>_padk_tuned / _padk_16x8 / _padk_8x8: the same after `unaligned_pad_kernels`'
#     coin is turned (v3=1, grown again by examples/staging_variants.rs): both operands
#     padded by kernels of their own, A's kernel storing it reduction first (a tiled
#     transpose, 32 rows a tile), both fetches in float4.
# Everything else as tuned. Writes <tag>_<variant>.sched here.   bash gen.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
probe=$here/..
root=$here/../../..
(cd "$root" && cargo build --release --example staging_variants -q)
grow=$root/target/release/examples/staging_variants
edit() { # src out rows cols [sed...]
  local src=$1 out=$2 rows=$3 cols=$4; shift 4
  sed -E -e "0,/sample_perfect_tile\((i0|i0_1), n=5/s/(sample_perfect_tile\((i0|i0_1), n=5, max_innermost_factor=16, decision=)\[[0-9, ]+\]/\1[$rows]/" \
         -e "0,/sample_perfect_tile\((i1|i1_1), n=5/s/(sample_perfect_tile\((i1|i1_1), n=5, max_innermost_factor=16, decision=)\[[0-9, ]+\]/\1[$cols]/" \
         "$@" "$src" > "$here/$out.sched"
}
a4=(-e '/^v18 = /s/decision=[0-9]/decision=2/')   # A's fetch in float4
b4=(-e '/^v19 = /s/decision=[0-9]/decision=2/')   # B's fetch in float4
gemm() { # tag workload sched rows16x8 rows8x8 cols [v0 decision for 128-row padding]
  local tag=$1 w=$2 src=$3 r16=$4 r8=$5 cols=$6 pad=${7:-}
  local v0=() && [[ -n $pad ]] && v0=(-e "/^v0 = /s/decision=[0-9]/decision=$pad/")
  edit "$src" ${tag}_16x8 "$r16" "$cols" "${a4[@]}" "${v0[@]}"
  edit "$src" ${tag}_8x8 "$r8" "$cols" "${a4[@]}" "${v0[@]}"
  local tmp; tmp=$(mktemp -d)
  "$grow" "$w" "$src" "$tmp" v3=1 > /dev/null
  local base=$tmp/t0_pad_tiled_32.sched
  sed -E "${a4[@]}" "${b4[@]}" "$base" > "$here/${tag}_padk_tuned.sched"
  edit "$base" ${tag}_padk_16x8 "$r16" "$cols" "${a4[@]}" "${b4[@]}" "${v0[@]}"
  edit "$base" ${tag}_padk_8x8 "$r8" "$cols" "${a4[@]}" "${b4[@]}" "${v0[@]}"
  rm -rf "$tmp"
}
gemm nn3779 matmul:m=3779,n=941,k=787,layout=nn $probe/weak_gemm_variants/nn3779_best.sched \
  "30, 4, 8, 1, 4" "30, 2, 16, 1, 4" "8, 2, 16, 1, 4"
gemm nn1556 matmul:m=1556,n=3953,k=2198,layout=nn $probe/register_fetch/tk_1556x3953x2198_nn.sched \
  "13, 4, 8, 1, 4" "13, 2, 16, 1, 4" "31, 2, 16, 1, 4" 3
gemm nn1804 matmul:m=1804,n=846,k=1710,layout=nn $probe/register_fetch/tk_1804x846x1710_nn.sched \
  "15, 4, 8, 1, 4" "15, 2, 16, 1, 4" "7, 2, 16, 1, 4" 4
