#!/usr/bin/env bash
# The staged rows' copy in 16-byte vectors against the element-at-a-time copy, on the same
# schedule (RESULTS.md, "A fused block's rows staged in shared memory"): for each softmax,
# a staged, vectorized sample of `tessel sample --seed 3 -n 256` (the one of most threads
# per block), the same trace without the vector split (`vec.sched`, `scalar.sched` in
# OUT), each run by `tessel run` twice, alternating. With UNROLL=1 the second schedule is
# the first with its copy loop unrolled instead (`unroll.sched`). OUT's schedules also
# serve benches/ncu_profile.sh.
#
#   benches/stage_copy_ab.sh OUT [WORKLOAD.tw ...]
set -u
out=$1
shift
bin=${TESSEL_BIN:-./.gpu/tessel}
ws=("$@")
((${#ws[@]})) || ws=(benches/softmax_1278x8144.tw benches/softmax_2819x6224.tw benches/softmax_512x8192.tw)
mkdir -p "$out"
for w in "${ws[@]}"; do
  tag=$(basename "$w" .tw)
  "$bin" sample "$w" --target cuda -n 256 --seed 3 --json >"$out/$tag.json" || continue
  other=${UNROLL:+unroll}
  python3 - "$out/$tag.json" "$out/$tag" "${other:-scalar}" <<'PY' || continue
import json, re, sys
samples = [s for s in json.load(open(sys.argv[1]))
           if "read_cache" in s["trace"] and "vectorize(" in s["trace"]]
if not samples:
    sys.exit(f"{sys.argv[1]}: no staged sample with vector copies")
trace = max(samples, key=lambda s: s["threads_per_block"])["trace"]
open(sys.argv[2] + "-vec.sched", "w").write(trace)
split = re.compile(r"(\w+), (\w+), (\w+), (\w+) = split\((\w+), factors=\[None, (v\d+), (v\d+), 4\]\)")
lines = trace.splitlines()
if sys.argv[3] == "unroll":
    copy = next(m for m in map(split.match, lines) if m)
    lines.append(f"unroll({copy[1]})")
else:
    out = []
    for line in lines:
        m = split.match(line)
        if m:
            line = f"{m[1]}, {m[2]}, {m[3]} = split({m[5]}, factors=[None, {m[6]}, {m[7]}])"
        elif line.startswith("vectorize("):
            continue
        out.append(line)
    lines = out
open(f"{sys.argv[2]}-{sys.argv[3]}.sched", "w").write("\n".join(lines) + "\n")
PY
  for v in vec "${other:-scalar}" vec "${other:-scalar}"; do
    echo "$tag $v $("$bin" run "$w" --schedule "$out/$tag-$v.sched" --target cuda 2>&1 |
      grep -E '^(speed|check)' | tr '\n' ' ')"
  done
done
