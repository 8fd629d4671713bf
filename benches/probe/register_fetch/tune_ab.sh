#!/usr/bin/env bash
# `pipeline.register_fetch` A/B'd in tuning: issue 14's protocol (benches/conv_view_ab.sh:
# a base database of the shipped records and their model, 300 trials, the default search,
# seed $TESSEL_SEED or 11) with search_spaces/cuda.toml (A, the key off) and the same file
# with the key on (B), one after the other on one GPU, each best against cublasLt.
#
#   benches/probe/register_fetch/tune_ab.sh OUT set1|set2
#     set1: GEMMs of benches/tuning.toml whose fetch transposes by vectors (even k), and
#           two transformer-like shapes
#     set2: small-batch NT dense layers drawn with random.Random(20261152)
set -u
out=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
case ${2:-set1} in
  set1) ws=(matmul:m=1804,n=846,k=1710,layout=nn matmul:m=1556,n=3953,k=2198,layout=nn
      matmul:m=3095,n=2117,k=2544,layout=tt matmul:m=3031,n=2650,k=390,layout=tt
      matmul:m=118,n=3227,k=3198,layout=nt matmul:m=3870,n=3059,k=1716,layout=nt
      matmul:m=512,n=4096,k=4096,layout=nt matmul:m=384,n=768,k=3072,layout=nn) ;;
  set2) ws=(matmul:m=84,n=1152,k=3776,layout=nt matmul:m=78,n=3968,k=3712,layout=nt
      matmul:m=39,n=2432,k=704,layout=nt matmul:m=30,n=2176,k=768,layout=nt
      matmul:m=17,n=3968,k=4032,layout=nt matmul:m=127,n=2560,k=1856,layout=nt) ;;
  *) echo "unknown set $2" >&2; exit 2 ;;
esac
mkdir -p "$out"
sed 's/^register_fetch = false$/register_fetch = true/' "$here/../search_spaces/cuda.toml" >"$out/on.toml"
grep -q '^register_fetch = true$' "$out/on.toml" || { echo "no register_fetch key to turn on" >&2; exit 2; }
"$here/conv_view_ab.sh" "$out" "$here/../search_spaces/cuda.toml" "$out/on.toml" -- "${ws[@]}"
