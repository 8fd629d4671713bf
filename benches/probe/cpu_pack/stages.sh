#!/usr/bin/env bash
# Where an NCHW conv's CPU call goes (issue 16): the best schedule of DB for W (as
# benches/cpu_blas.sh leaves it), its C (`tessel best --emit c`) compiled with gcc's flags
# for this host and called back to back from a small harness with warm caches (as the
# Python peers are timed; `tessel run` evicts the buffers first), whole and with each
# stage before the main nest run once only: what the per-call weight pack and the padded
# copy of the data cost, and what the main nest reaches alone. Best and mean of 60 calls.
#   benches/probe/cpu_pack/stages.sh DB W [THREADS...]      (default threads: 2 1)
# DB may be a schedule file (`.sched`) instead: that schedule's C (`tessel show --emit c`);
# or a C file (`.c`) of such a kernel, edited by hand.
#   e.g. benches/probe/cpu_pack/stages.sh /tmp/cb/cpu_blas.sqlite \
#          conv2d_nchw:n=1,c=256,h=14,w=14,k=256,r=3,s=3,stride=1,pad=1
set -eu
db=$1 w=$2
shift 2
threads=("${@:-2 1}")
read -ra threads <<<"${threads[*]}"
bin=${TESSEL_BIN:-./target/release/tessel}
dir=$(mktemp -d)
if [[ $db == *.c ]]; then
  cp "$db" "$dir/k.c"
elif [[ $db == *.sched ]]; then
  "$bin" show "$w" --schedule "$db" --emit c >"$dir/k.c"
else
  "$bin" best "$w" --target cpu --db "$db" --emit c >"$dir/k.c" 2>/dev/null
fi
python3 - "$dir" "$w" <<'PY'
import re, sys
d, w = sys.argv[1], sys.argv[2]
p = {kv.split("=")[0]: int(kv.split("=")[1]) for kv in w.partition(":")[2].split(",")}
n, c, h, wd, k, r, s = (p[x] for x in "nchwkrs")
pad, stride = p.get("pad", 0), p.get("stride", 1)
oh, ow = (h + 2 * pad - r) // stride + 1, (wd + 2 * pad - s) // stride + 1
flops = 2 * n * k * oh * ow * c * r * s
# Every buffer as large as the largest of the conv's (input, weights, output, padded
# input): a stage's buffer is one of them or a copy of one.
size = max(n * c * h * wd, k * c * r * s, n * k * oh * ow, n * c * (h + 2 * pad) * (wd + 2 * pad))
src = open(f"{d}/k.c").read()
sig = re.search(r"void main_kernel\(([^)]*)\)", src).group(1)
args = [a.split()[-1] for a in sig.split(",")]
loops = [m.start() for m in re.finditer(r"^  #pragma omp parallel for", src, re.M)]
def once(text, a, b):
    return text[:a] + "  static int first = 1; if (first) { first = 0;\n" + text[a:b] + "  }\n" + text[b:]
variants = {"whole": src}
for i in range(len(loops) - 1):
    stage = re.search(r"// block (\w+)", src[loops[i]:]).group(1)
    variants[f"without_{stage}"] = once(src, loops[i], loops[i + 1])
if len(loops) > 1:
    variants["main_nest_only"] = once(src, loops[0], loops[-1])
decl = ", ".join(f"float* restrict {a}" for a in args)
for name, text in variants.items():
    open(f"{d}/{name}.c", "w").write(text)
open(f"{d}/harness.c", "w").write(f"""#include <stdio.h>
#include <stdlib.h>
#include <time.h>
void main_kernel({decl});
static double now(void) {{ struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }}
int main(void) {{
  float *b[{len(args)}];
  for (int i = 0; i < {len(args)}; i++) {{ b[i] = calloc({size}, 4); for (long j = 0; j < {size}; j++) b[i][j] = (float)(j % 7); }}
  main_kernel({", ".join(f"b[{i}]" for i in range(len(args)))});
  double best = 1e9, sum = 0;
  for (int it = 0; it < 60; it++) {{
    double t0 = now();
    main_kernel({", ".join(f"b[{i}]" for i in range(len(args)))});
    double t = now() - t0; sum += t; if (t < best) best = t;
  }}
  printf("best %.3f ms, mean %.3f ms, %.1f GFLOP/s at the best\\n", best * 1e3, sum / 60 * 1e3, {flops} / best / 1e9);
  return 0;
}}
""")
open(f"{d}/variants", "w").write("".join(v + "\n" for v in variants))
PY
flags=${CFLAGS:--O3 -march=native -ffp-contract=fast}  # tessel: -O3, the ISA flags of its target, -ffp-contract=fast
while read -r v; do
  gcc $flags -fopenmp "$dir/harness.c" "$dir/$v.c" -o "$dir/$v"
done <"$dir/variants"
for t in "${threads[@]}"; do
  while read -r v; do
    printf '%d threads, %-22s %s\n' "$t" "$v" "$(OMP_NUM_THREADS=$t "$dir/$v")"
  done <"$dir/variants"
done
rm -rf "$dir"
