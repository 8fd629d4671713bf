set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
date -u | tee -a $OUT/device.txt
# 1. the GPU tests
(TESSEL_GPU=1 timeout 150 ./.gpu/tests/gpu --test-threads=1 > $OUT/gpu_tests.txt 2>&1; echo "rc=$?" >> $OUT/gpu_tests.txt) 
tail -3 $OUT/gpu_tests.txt
# 2. the probes
P=$OUT/probe
bash benches/probe/ffma_128x128/gen.sh $P 3840x1024x800 1280x1536x3088 2048x2048x2048 4096x4096x4096
for f in $P/*.cu; do mv $f ${f%.cu}_bk16.cu; done
BK=32 bash benches/probe/ffma_128x128/gen.sh $P 3840x1024x800 2048x2048x2048 4096x4096x4096
timeout 200 python3 benches/cuda_probe.py $P/*.cu 2>&1 | tee $OUT/probe.md
# 3. tessel's tuned best on the unpadded GEMM, and cublasLt
for w in matmul:m=3779,n=941,k=787,layout=nn matmul:2048x2048x2048; do
  tag=$(printf '%s' "$w" | tr ':,=' '___')
  timeout 120 ./.gpu/tessel tune $w --target cuda --trials 300 --db $OUT/db.sqlite --seed 11 > $OUT/$tag.tune.txt 2>&1
  ./.gpu/tessel best $w --target cuda --db $OUT/db.sqlite > $OUT/$tag.sched 2>/dev/null
  timeout 60 ./.gpu/tessel run $w --target cuda --schedule $OUT/$tag.sched --compare > $OUT/$tag.run.txt 2>&1
  grep -E "^(speed|peer|latency|trials)" $OUT/$tag.tune.txt $OUT/$tag.run.txt
done
date -u
