#!/usr/bin/env bash
# Kernel durations and DRAM throughput of the cross-thread GEMV example and of cublasLt's
# kernels for the same GEMV, from one `tessel run --compare` under ncu (clocks left alone,
# its default cache control: caches flushed before each profiled kernel). Writes OUT/ncu.csv
# and prints per kernel name and grid the median duration, DRAM throughput and L2 hit rate.
#
#   OUT=/tmp/ncu benches/probe/cross_thread_gemv/ncu.sh          (the bundle's ./.gpu/tessel)
set -u
w="matmul:m=1,n=4096,k=4096,layout=nt"
mkdir -p "$OUT"
ncu --clock-control none --csv --page raw -c 300 \
  --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,launch__grid_size,launch__block_size \
  ./.gpu/tessel run "$w" --schedule examples/schedules/cross_thread_gemv.sched --target cuda --compare > $OUT/ncu.csv 2> $OUT/ncu.err
python3 - $OUT/ncu.csv <<'PY'
import csv, sys, statistics, collections
rows = list(csv.reader(open(sys.argv[1])))
hdr = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
h = rows[hdr]; data = rows[hdr + 2:]
col = {n: h.index(n) for n in h}
by = collections.defaultdict(list)
for r in data:
    if len(r) < len(h): continue
    name = (r[col["Kernel Name"]][:60], r[col["launch__grid_size"]], r[col["launch__block_size"]])
    by[name].append(r)
for (name, grid, block), rs in by.items():
    def f(m):
        try: return statistics.median(float(x[col[m]].replace(",", "")) for x in rs)
        except Exception: return None
    print(f"{name}: n={len(rs)} time {f('gpu__time_duration.sum')} dram% {f('dram__throughput.avg.pct_of_peak_sustained_elapsed')} "
          f"read {f('dram__bytes_read.sum')} L2hit% {f('lts__t_sector_hit_rate.pct')} grid {grid} block {block}")
PY
tail -3 $OUT/ncu.err
