#!/usr/bin/env bash
# Whether the cold time of a two-kernel best that does not hold on some machines depends
# on where the measurement's L2-flush buffer lies: with a binary built from
# flush_order.patch (two probe variables, not in the tree: TESSEL_PROBE_FLUSH_FIRST
# allocates the flush buffer before the workload's buffers, TESSEL_PROBE_GAP_MB leaves
# that many MiB allocated before them), the seed-11 best of 2953 x 379 x 1013 NT run
# cold by fresh `tessel run` processes in each arrangement, and warm. It first runs the
# default twice and stops unless the machine is one where the time moves (< 22 TFLOP/s).
#
#   bash benches/probe/unstable_best/flush_order.sh
bin=${TESSEL_BIN:-./.gpu/tessel}
here=$(dirname "$0")
w=matmul:m=2953,n=379,k=1013,layout=nt
speed() { "$bin" run $w --schedule "$here/seed11_2026_11_30.sched" --target cuda "$@" 2>&1 | grep -E '^speed' | awk '{print $2}'; }
check="$(speed) $(speed)"
echo "default, cold: $check"
nvidia-smi --query-gpu=serial,pci.bus_id --format=csv,noheader
python3 -c "import sys; sys.exit(0 if min(map(float, sys.argv[1:])) < 22 else 1)" $check ||
  { echo "a machine that holds the time"; exit 0; }
for i in 1 2; do
  echo "default, cold: $(speed) $(speed) $(speed)"
  echo "flush first, cold: $(TESSEL_PROBE_FLUSH_FIRST=1 speed) $(TESSEL_PROBE_FLUSH_FIRST=1 speed) $(TESSEL_PROBE_FLUSH_FIRST=1 speed)"
  for g in 2 64 512; do
    echo "gap $g MiB, cold: $(TESSEL_PROBE_GAP_MB=$g speed) $(TESSEL_PROBE_GAP_MB=$g speed) $(TESSEL_PROBE_GAP_MB=$g speed)"
  done
done
echo "default, warm: $(speed --warm) $(speed --warm)"
