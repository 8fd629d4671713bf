// The fp32 (FFMA) GEMM tessel's CUDA sketch builds at its best on 4096^3 (benches/
// gemm_ceiling.py's 128x128_lanes4x8_k32_s3: 256 threads, 8 x 8 outputs a thread in four
// 4 x 4 pieces, A staged reduction-major with rows of 132, B row-major, 3 cp.async
// stages of 32), written out by hand with the same indices, and the mainloop changes under
// study (benches/cuda_probe.py times it):
//   PREFETCH    the operands of reduction step k+1 loaded into registers before the FFMAs
//               of step k, and the next stage's first step loaded before the last FFMAs of
//               a stage (the wait and the barrier move to the last step: CUTLASS's mainloop)
//   INTERLEAVE  (with PREFETCH) the next stage's copies spread over the first 20 steps,
//               one cp.async per step, instead of a burst at the top of the stage
#define M 4096
#define N 4096
#define K 4096
#define AROWS 132
#define A_STAGE 4224
#define B_STAGE 4096
#define STAGES 3

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void cp4(float* dst, const float* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(dst)), "l"(src));
}
__device__ __forceinline__ void cp16(float* dst, const float* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
}

// Copy number c (0..19) of this thread for reduction tile kt into stage buffer s.
__device__ __forceinline__ void copy(int c, float* as, float* bs, const float* A, const float* B,
                                     int kt, int s, int tx, int bx) {
  if (c < 16) {
    const int f0 = c / 4, f2 = c % 4;
    cp4(as + (tx % 8) * 528 + f2 * 132 + f0 * 32 + tx / 8 + s * A_STAGE,
        A + (bx / 32) * 524288 + f0 * 131072 + (tx / 8) * 4096 + kt * 32 + (tx % 8) * 4 + f2);
  } else {
    const int f0 = c - 16;
    cp16(bs + f0 * 1024 + tx * 4 + s * B_STAGE,
         B + kt * 131072 + f0 * 32768 + (tx / 32) * 4096 + (bx % 32) * 128 + (tx % 32) * 4);
  }
}

struct Frag {
  float a[8], b[8];
};

__device__ __forceinline__ void load(Frag& f, const float* as, const float* bs, int k, int tx) {
  const float4* pa = (const float4*)(as + k * AROWS + (tx / 64) * 16 + ((tx / 8) % 4) * 4);
  const float4* pb = (const float4*)(bs + k * 128 + ((tx / 32) % 2) * 32 + (tx % 8) * 4);
  float4 a0 = pa[0], a1 = pa[16], b0 = pb[0], b1 = pb[16];
  f.a[0] = a0.x; f.a[1] = a0.y; f.a[2] = a0.z; f.a[3] = a0.w;
  f.a[4] = a1.x; f.a[5] = a1.y; f.a[6] = a1.z; f.a[7] = a1.w;
  f.b[0] = b0.x; f.b[1] = b0.y; f.b[2] = b0.z; f.b[3] = b0.w;
  f.b[4] = b1.x; f.b[5] = b1.y; f.b[6] = b1.z; f.b[7] = b1.w;
}

__device__ __forceinline__ void ffma(float (&c)[8][8], const Frag& f) {
  #pragma unroll
  for (int i = 0; i < 8; ++i)
    #pragma unroll
    for (int j = 0; j < 8; ++j) c[i][j] += f.a[i] * f.b[j];
}

// launch: grid=(1024, 1, 1) block=(256, 1, 1) shared=99840 bytes (dynamic)
// problem: m=4096 n=4096 k=4096 dtype=f32
extern "C" __global__ void __launch_bounds__(256) ffma_gemm(const float* __restrict__ A,
                                                            const float* __restrict__ B,
                                                            float* __restrict__ C) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* as = (float*)smem;
  float* bs = (float*)(smem + 50688);
  const int tx = threadIdx.x, bx = blockIdx.x;
  float c[8][8];
  #pragma unroll
  for (int i = 0; i < 8; ++i)
    #pragma unroll
    for (int j = 0; j < 8; ++j) c[i][j] = 0.f;
  for (int s = 0; s < STAGES - 1; ++s) {
    #pragma unroll
    for (int q = 0; q < 20; ++q) copy(q, as, bs, A, B, s, s, tx, bx);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }
  const int KT = K / 32;
#ifdef PREFETCH
  Frag f[2];
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
  __syncthreads();
  load(f[0], as, bs, 0, tx);
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % STAGES, w = (kt + 2) % STAGES;
    const bool more = kt + 2 < KT;
#ifndef INTERLEAVE
    if (more) {
      #pragma unroll
      for (int q = 0; q < 20; ++q) copy(q, as, bs, A, B, kt + 2, w, tx, bx);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
    #pragma unroll
    for (int k = 0; k < 32; ++k) {
#ifdef INTERLEAVE
      if (k < 20 && more) copy(k, as, bs, A, B, kt + 2, w, tx, bx);
      if (k == 19) asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
      if (k == 31) {
        asm volatile("cp.async.wait_group 1;\n" ::: "memory");
        __syncthreads();
        const int s1 = (kt + 1) % STAGES;
        load(f[0], as + s1 * A_STAGE, bs + s1 * B_STAGE, 0, tx);
      } else {
        load(f[(k + 1) % 2], as + s * A_STAGE, bs + s * B_STAGE, k + 1, tx);
      }
      ffma(c, f[k % 2]);
    }
  }
#else
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % STAGES, w = (kt + 2) % STAGES;
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    __syncthreads();
    if (kt + 2 < KT) {
      #pragma unroll
      for (int q = 0; q < 20; ++q) copy(q, as, bs, A, B, kt + 2, w, tx, bx);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    #pragma unroll
    for (int k = 0; k < 32; ++k) {
      Frag f;
      load(f, as + s * A_STAGE, bs + s * B_STAGE, k, tx);
      ffma(c, f);
    }
  }
#endif
  // Thread tx's 8 x 8: rows (vt/2)*64 + (tx/64)*16 + ((tx/8)%4)*4 + i, cols (vt%2)*64 +
  // ((tx/32)%2)*32 + (tx%8)*4 + j, for the four pieces vt.
  #pragma unroll
  for (int i = 0; i < 8; ++i)
    #pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int r = (bx / 32) * 128 + (i / 4) * 64 + (tx / 64) * 16 + ((tx / 8) % 4) * 4 + i % 4;
      const int col = (bx % 32) * 128 + (j / 4) * 64 + ((tx / 32) % 2) * 32 + (tx % 8) * 4 + j % 4;
      C[(size_t)r * N + col] = c[i][j];
    }
}
