// The issue rate of mma.sync.m16n8k16 (f16 in, f32 accumulators) on its own: each warp runs
// ITERS rounds of CHAINS independent mma.sync on registers, no memory traffic, so the
// time gives the tensor pipe's ceiling for the legacy warp-level instruction.
// benches/cuda_probe.py reads the flop count from the `peak:` line.
#define ITERS 4096
#define CHAINS 8
// launch: grid=(1056, 1, 1) block=(256, 1, 1) shared=0 bytes (dynamic)
// peak: flops=1133871366144
extern "C" __global__ void mma_peak(const unsigned short* A, const unsigned short* B, unsigned short* C) {
  unsigned a0 = threadIdx.x, a1 = a0 * 3, a2 = a0 * 5, a3 = a0 * 7, b0 = a0 ^ 0x3c00, b1 = a0 + 11;
  float c[CHAINS][4];
  #pragma unroll
  for (int i = 0; i < CHAINS; ++i) c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0.f;
  for (int it = 0; it < ITERS; ++it) {
    #pragma unroll
    for (int i = 0; i < CHAINS; ++i)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
          "{%8, %9}, {%0, %1, %2, %3};\n"
          : "+f"(c[i][0]), "+f"(c[i][1]), "+f"(c[i][2]), "+f"(c[i][3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  float s = 0.f;
  #pragma unroll
  for (int i = 0; i < CHAINS; ++i) s += c[i][0] + c[i][1] + c[i][2] + c[i][3];
  if (s == 1.2345f) C[threadIdx.x] = 1;  // keeps the chains alive
}
