# Sourced by the ncu benches (kernel_times.sh, stall_reasons.sh): one workload's best
# and the cuBLAS kernels `tessel run --compare` launches, each profiled by ncu.
#   ncu_pair BIN WORKLOAD SCHED METRICS TESSEL_COUNT PEER_COUNT TESSEL_CSV PEER_CSV
ncu_pair() {
  ncu --clock-control none -k regex:main_kernel -c "$5" --metrics "$4" --csv \
    "$1" run "$2" --schedule "$3" --target cuda >"$7" 2>&1
  ncu --clock-control none -k 'regex:gemm|Kernel|sm90|sm80' -c "$6" --metrics "$4" --csv \
    "$1" run "$2" --schedule "$3" --target cuda --compare >"$8" 2>&1
}
