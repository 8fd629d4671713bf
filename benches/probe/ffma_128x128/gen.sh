#!/usr/bin/env bash
# Writes OUT/<M>x<N>x<K>_<variant>.cu for benches/cuda_probe.py from kernel.cu: each shape
# (multiples of 128, K of BK) without and with PREFETCH.   gen.sh OUT MxNxK...
set -eu
out=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
for shape in "$@"; do
  IFS=x read -r m n k <<<"$shape"
  for v in plain prefetch; do
    f=$out/${shape}_$v.cu
    {
      echo "// launch: grid=($(( (m / 128) * (n / 128) )), 1, 1) block=(128, 1, 1) shared=$(( 3 * 2 * ${BK:-16} * 128 * 4 )) bytes (dynamic)"
      echo "// problem: m=$m n=$n k=$k dtype=f32 a=t"
      echo "#define BK ${BK:-16}"
      echo "#define M $m"
      echo "#define N $n"
      echo "#define K $k"
      [ $v = prefetch ] && echo "#define PREFETCH"
      cat "$here/kernel.cu"
    } >"$f"
  done
done
