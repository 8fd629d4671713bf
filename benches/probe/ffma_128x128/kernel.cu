// A cuBLAS-shaped fp32 (FFMA) GEMM mainloop, written by hand to find out whether register
// double-buffering of the warp fragments is what tessel's 128-outputs-a-thread kernels
// lack (benches/RESULTS.md, issue 14: with two warps a scheduler they leave the issue slots
// idle where cublasLt's kernels of that shape run at 90%). 128 x 128 blocks of 128 threads
// (four warps of 64 x 64), 16 x 8 outputs a thread (rows in four 4-row pieces 16 apart,
// columns in two 4-column pieces 32 apart, so that every fragment is read with LDS.128),
// A read transposed (K x M, as tessel's transposing kernel leaves it: `a=t` below), both
// tiles copied with 16-byte cp.async into STAGES buffers of BK steps.
//   PREFETCH  the fragments of step k+1 loaded into a second register set before the FFMAs
//             of step k; the next stage's wait and barrier at a stage's last step
// gen.sh writes one file per shape and variant (M, N, K, PREFETCH set by #define).
#ifndef BK
#define BK 16
#endif
#define STAGES 3
#define A_STAGE (BK * 128)
#define B_STAGE (BK * 128)

__device__ __forceinline__ void cp16(float* dst, const float* src) {
  unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}

// This thread's copies of reduction tile kt into stage buffer s: BK rows of 32 float4 of
// each operand, BK / 4 of each a thread.
__device__ __forceinline__ void copy(float* as, float* bs, const float* At, const float* B,
                                     int kt, int s, int tx, int bm, int bn) {
  #pragma unroll
  for (int q = 0; q < BK / 4; ++q) {
    const int idx = q * 128 + tx, r = idx / 32, c4 = idx % 32;
    cp16(as + s * A_STAGE + r * 128 + c4 * 4, At + (size_t)(kt * BK + r) * M + bm * 128 + c4 * 4);
    cp16(bs + s * B_STAGE + r * 128 + c4 * 4, B + (size_t)(kt * BK + r) * N + bn * 128 + c4 * 4);
  }
}

struct Frag {
  float a[16], b[8];
};

__device__ __forceinline__ void load(Frag& f, const float* as, const float* bs, int k, int ar, int bc) {
  #pragma unroll
  for (int c = 0; c < 4; ++c) {
    const float4 v = *(const float4*)(as + k * 128 + ar + c * 16);
    f.a[c * 4 + 0] = v.x; f.a[c * 4 + 1] = v.y; f.a[c * 4 + 2] = v.z; f.a[c * 4 + 3] = v.w;
  }
  #pragma unroll
  for (int d = 0; d < 2; ++d) {
    const float4 v = *(const float4*)(bs + k * 128 + bc + d * 32);
    f.b[d * 4 + 0] = v.x; f.b[d * 4 + 1] = v.y; f.b[d * 4 + 2] = v.z; f.b[d * 4 + 3] = v.w;
  }
}

__device__ __forceinline__ void ffma(float (&c)[16][8], const Frag& f) {
  #pragma unroll
  for (int i = 0; i < 16; ++i)
    #pragma unroll
    for (int j = 0; j < 8; ++j) c[i][j] += f.a[i] * f.b[j];
}

extern "C" __global__ void __launch_bounds__(128) ffma_128x128(const float* __restrict__ At,
                                                               const float* __restrict__ B,
                                                               float* __restrict__ C) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* as = (float*)smem;
  float* bs = as + STAGES * A_STAGE;
  const int tx = threadIdx.x, bn = blockIdx.x % (N / 128), bm = blockIdx.x / (N / 128);
  const int warp = tx / 32, lane = tx % 32;
  const int ar = (warp / 2) * 64 + (lane / 8) * 4;  // first of this thread's A rows
  const int bc = (warp % 2) * 64 + (lane % 8) * 4;  // first of its B columns
  float c[16][8];
  #pragma unroll
  for (int i = 0; i < 16; ++i)
    #pragma unroll
    for (int j = 0; j < 8; ++j) c[i][j] = 0.f;
  const int KT = K / BK;
  for (int s = 0; s < STAGES - 1; ++s) {
    copy(as, bs, At, B, s, s, tx, bm, bn);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }
#ifdef PREFETCH
  Frag f[2];
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
  __syncthreads();
  load(f[0], as, bs, 0, ar, bc);
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % STAGES;
    if (kt + STAGES - 1 < KT) copy(as, bs, At, B, kt + STAGES - 1, (kt + STAGES - 1) % STAGES, tx, bm, bn);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    #pragma unroll
    for (int k = 0; k < BK; ++k) {
      if (k == BK - 1) {
        asm volatile("cp.async.wait_group 1;\n" ::: "memory");
        __syncthreads();
        const int s1 = (kt + 1) % STAGES;
        load(f[0], as + s1 * A_STAGE, bs + s1 * B_STAGE, 0, ar, bc);
      } else {
        load(f[(k + 1) % 2], as + s * A_STAGE, bs + s * B_STAGE, k + 1, ar, bc);
      }
      ffma(c, f[k % 2]);
    }
  }
#else
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % STAGES;
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    __syncthreads();
    if (kt + STAGES - 1 < KT) copy(as, bs, At, B, kt + STAGES - 1, (kt + STAGES - 1) % STAGES, tx, bm, bn);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    #pragma unroll
    for (int k = 0; k < BK; ++k) {
      Frag f;
      load(f, as + s * A_STAGE, bs + s * B_STAGE, k, ar, bc);
      ffma(c, f);
    }
  }
#endif
  #pragma unroll
  for (int i = 0; i < 16; ++i)
    #pragma unroll
    for (int d = 0; d < 2; ++d) {
      const int row = bm * 128 + ar + (i / 4) * 16 + i % 4, col = bn * 128 + bc + d * 32;
      *(float4*)(C + (size_t)row * N + col) =
          make_float4(c[i][d * 4], c[i][d * 4 + 1], c[i][d * 4 + 2], c[i][d * 4 + 3]);
    }
}
