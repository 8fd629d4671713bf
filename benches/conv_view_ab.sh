#!/usr/bin/env bash
# Convolutions tuned as issue 14's protocol tunes them (a base database of the shipped
# records and the model trained on them, the default evolutionary search, 300 trials or
# $TESSEL_TRIALS, batch 64, seed 11 or $TESSEL_SEED, a 60 s limit or $TESSEL_TIME_LIMIT,
# focused retraining, the fastest
# $TESSEL_CONFIRM (3) records timed again in fresh workers) with one or two
# search-space files, one after the other on the GPU; per tune the best's check and speed
# (`tessel run`), whether the best took the GEMM view (`im2col(`) and how many operands
# it copies by kernels of their own (`scope="global"`) or stores transposed by the
# padding kernels that write them (`pt`), the unroll bound drawn for the steps of a fetch
# that walks its gathered data (`wu`, - for none), and the tune's own records grouped as the
# conv's loops or its GEMM view, each with or without such copies (`+tk`), with or without a split reduction (`+sk`, split-K), with the unroll bound of a walked fetch (`+w0`, `+w32`) and with rows padded to 16 bytes (`+al`, and `al` the best's count of such copies): how many, how many
# ran, the fastest. Then cuDNN (benches/cudnn_conv.py) for
# each conv in the same call. Other workloads (GEMMs) are run against cublasLt in the same
# process (`tessel run --compare`); their records are all "loops".
#
#   benches/conv_view_ab.sh OUT SPACE_A [SPACE_B] -- CONV...
#   e.g. sed 's/^gemm_view_windowed = 0.5/gemm_view_windowed = 0.0/' search_spaces/cuda.toml >/tmp/off.toml
#        benches/conv_view_ab.sh /tmp/cv /tmp/off.toml search_spaces/cuda.toml -- conv2d_nchw:n=8,...
set -u
out=$1
shift
spaces=()
while [[ $1 != -- ]]; do spaces+=("$1"); shift; done
shift
bin=${TESSEL_BIN:-./.gpu/tessel}
base=${TESSEL_BASE_DB:-/tmp/tessel-conv-ab-base.sqlite}
export TESSEL_SHIPPED=off
mkdir -p "$out/best"
source "$(dirname "$0")/shipped_db.sh"
shipped_db "$bin" "$base" "$out"
last=$(python3 -c "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('select max(id) from records').fetchone()[0])" "$base")
db=/tmp/tessel-conv-ab.sqlite sched=/tmp/tessel-conv-ab.sched
for w in "$@"; do
  for sp in "${spaces[@]}"; do
    fresh_db "$base" "$db"
    t=$("$bin" tune "$w" --target cuda --space "$sp" --trials "${TESSEL_TRIALS:-300}" \
      --time-limit "${TESSEL_TIME_LIMIT:-60}" --batch 64 \
      --seed "${TESSEL_SEED:-11}" --db "$db" --retrain focused --confirm "${TESSEL_CONFIRM:-3}" 2>/dev/null | grep -E "^stopped" | tr '\n' ' ')
    "$bin" best "$w" --target cuda --db "$db" --emit trace >"$sched" 2>/dev/null
    cp "$sched" "$out/best/$(echo "$w" | tr -c 'A-Za-z0-9_\n' '_')-$(basename "$sp" .toml).sched"
    # A GEMM's best against cublasLt in the same process; a conv's cuDNN runs below.
    case $w in conv2d*) cmp= ;; *) cmp=--compare ;; esac
    r=$("$bin" run "$w" --schedule "$sched" --target cuda $cmp 2>&1 | grep -E "^(speed|check|peer)" | tr '\n' ' ')
    # Operands stored reduction first by kernels of their own: copies, or padding kernels
    # that store their operand transposed (pt).
    pt=$(awk -F' = ' '/get_block\(".*_pad"\)/ {pad[$1] = 1} /^transform_layout\(/ {split($0, a, "[(,]"); if (a[2] in pad) n++} END {print n + 0}' "$sched")
    # The unroll bound drawn for each walked fetch's steps (`cache_read.walk_unroll`), - for none.
    wu=$(python3 - "$sched" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
drawn = {m[1]: m[2].split(", ")[int(m[3])] for m in re.finditer(
    r"(v\d+) = sample_categorical\(candidates=\[([^]]*)\], probs=\[[^]]*\], decision=(\d+)\)", text)}
walks = re.findall(r'annotate\(\w+_fused_0, key="pragma_auto_unroll_max_step", value=(v\d+)\)', text)
print(",".join(drawn[v] for v in walks) or "-")
PY
)
    # Copies stored reduction first with rows padded to 16 bytes (`cache_read.aligned_rows`).
    al=$(grep -cE 'factor=32, offset=(4|8)\)' "$sched")
    echo "$w | $(basename "$sp") | $t | view $(grep -c 'im2col(' "$sched") tk $(grep -c 'scope="global")' "$sched") pt $pt wu $wu al $al | $r"
    python3 - "$db" "$last" <<'PY'
import json, sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute(
    "select trace_json, status, median_secs from records where id > ?", (int(sys.argv[2]),))
groups = {}
def pad_transposed(trace):
    """Whether a padding kernel of the trace stores its operand transposed."""
    insts = json.loads(trace)["insts"]
    pads = {o for i in insts if i["kind"] == "get_block"
            and str(i["attrs"].get("name", "")).endswith("_pad") for o in i["outputs"]}
    return any(i["kind"] == "transform_layout" and i["inputs"][:1]
               and i["inputs"][0].get("rv") in pads for i in insts)
def walk_unroll(trace):
    """`+w` and the unroll bound drawn where a fetch walks its gathered data, else ''."""
    t = json.loads(trace)
    drawn = {i["outputs"][0]: i["attrs"]["candidates"][i["decision"]]
             for i in t["insts"] if i["kind"] == "sample_categorical"}
    bounds = [drawn.get(i["attrs"]["value"].get("rv")) for i in t["insts"]
              if i["kind"] == "annotate" and i["attrs"]["key"] == "pragma_auto_unroll_max_step"
              and t["rvs"][i["inputs"][0]["rv"]]["name"].endswith("_fused_0")
              and isinstance(i["attrs"]["value"], dict)]
    return "".join(f"+w{b}" for b in bounds)
for trace, status, secs in rows:
    key = ("view" if "im2col" in trace else "loops") \
        + ("+tk" if '"global"' in trace or pad_transposed(trace) else "") \
        + ("+sk" if '"rfactor"' in trace else "") + walk_unroll(trace) \
        + ("+al" if any(i["kind"] == "storage_align" and i["attrs"]["factor"] == 32
                        and i["attrs"]["offset"] in (4, 8) for i in json.loads(trace)["insts"]) else "")
    g = groups.setdefault(key, [0, 0, None])
    g[0] += 1
    if status == "ok":
        g[1] += 1
        g[2] = secs if g[2] is None else min(g[2], secs)
print("   records:", "; ".join(
    f"{k}: {n} ({ok} ok)" + (f", best {b * 1e6:.1f} us" if b else "")
    for k, (n, ok, b) in sorted(groups.items())))
PY
  done
done
for w in "$@"; do
  [[ $w == conv2d* ]] || continue
  # shellcheck disable=SC2046
  python3 "$(dirname "$0")/cudnn_conv.py" $(python3 -c "
import sys
d = dict(kv.split('=') for kv in sys.argv[1].split(':')[1].split(','))
print(*[d[k] for k in 'n c h w k r s stride pad'.split()], 'nhwc' if 'nhwc' in sys.argv[1] else '')" "$w") 2>&1 | tail -1
done
