// A hand-written mma.sync GEMM in the structure tessel's tensor-core sketch emits (cp.async
// stages of padded rows, ldmatrix, mma.sync.m16n8k16, f16 in, f32 accumulators), with
// switches for the mainloop changes under study (benches/cuda_probe.py times it):
//   PREFETCH  fragments of step k+1 loaded before the mma of step k, and the next stage's
//             first fragments loaded before the last mma of a stage (CUTLASS's mainloop:
//             the wait and the barrier move to the last step of a stage)
//   BX4       B fragments by ldmatrix.x4.trans (two 8-column tiles a load) instead of .x2
// Tile: BM x BN x BK, WM x WN warps, STAGES shared stages. M, N, K multiples of the tile.
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WM
#define WM 2
#endif
#ifndef WN
#define WN 2
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef M
#define M 4096
#endif
#ifndef N
#define N 4096
#endif
#ifndef K
#define K 4096
#endif
#define THREADS (32 * WM * WN)
#define TM (BM / WM / 16)
#define TN (BN / WN / 8)
#define KSTEPS (BK / 16)
#define AROW (BK + 8)
#define BROW (BN + 8)
#define A_STAGE (BM * AROW)
#define B_STAGE (BK * BROW)

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void cp16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
}

__device__ __forceinline__ void load_stage(unsigned short* as, unsigned short* bs,
                                           const unsigned short* A, const unsigned short* B,
                                           int row0, int col0, int kt, int tid) {
  #pragma unroll
  for (int c = tid; c < BM * BK / 8; c += THREADS) {
    int r = c / (BK / 8), k8 = c % (BK / 8);
    cp16(as + r * AROW + k8 * 8, A + (size_t)(row0 + r) * K + kt * BK + k8 * 8);
  }
  #pragma unroll
  for (int c = tid; c < BK * BN / 8; c += THREADS) {
    int r = c / (BN / 8), n8 = c % (BN / 8);
    cp16(bs + r * BROW + n8 * 8, B + (size_t)(kt * BK + r) * N + col0 + n8 * 8);
  }
}

__device__ __forceinline__ void load_frag(unsigned (&a)[TM][4], unsigned (&b)[TN][2],
                                          const unsigned short* as, const unsigned short* bs,
                                          int wm0, int wn0, int kk, int lane) {
  #pragma unroll
  for (int i = 0; i < TM; ++i) {
    const unsigned short* p = as + (wm0 + i * 16 + lane % 16) * AROW + kk * 16 + (lane / 16) * 8;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(a[i][0]), "=r"(a[i][1]), "=r"(a[i][2]), "=r"(a[i][3])
                 : "r"(smem_addr(p)));
  }
#ifdef BX4
  #pragma unroll
  for (int j = 0; j < TN; j += 2) {
    const unsigned short* p = bs + (kk * 16 + lane % 16) * BROW + wn0 + j * 8 + (lane / 16) * 8;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(b[j][0]), "=r"(b[j][1]), "=r"(b[j + 1][0]), "=r"(b[j + 1][1])
                 : "r"(smem_addr(p)));
  }
#else
  #pragma unroll
  for (int j = 0; j < TN; ++j) {
    const unsigned short* p = bs + (kk * 16 + lane % 16) * BROW + wn0 + j * 8;
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(b[j][0]), "=r"(b[j][1])
                 : "r"(smem_addr(p)));
  }
#endif
}

__device__ __forceinline__ void mma(float (&c)[TM][TN][4], const unsigned (&a)[TM][4],
                                    const unsigned (&b)[TN][2]) {
  #pragma unroll
  for (int i = 0; i < TM; ++i) {
    #pragma unroll
    for (int j = 0; j < TN; ++j) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
          "{%8, %9}, {%0, %1, %2, %3};\n"
          : "+f"(c[i][j][0]), "+f"(c[i][j][1]), "+f"(c[i][j][2]), "+f"(c[i][j][3])
          : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1]));
    }
  }
}

__device__ __forceinline__ unsigned short f2h(float x) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}

// launch: grid=(GRID, 1, 1) block=(THREADS, 1, 1) shared=SHARED bytes (dynamic)
extern "C" __global__ void __launch_bounds__(THREADS) mma_gemm(const unsigned short* __restrict__ A,
                                                               const unsigned short* __restrict__ B,
                                                               unsigned short* __restrict__ C) {
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned short* as = (unsigned short*)smem;
  unsigned short* bs = as + STAGES * A_STAGE;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int row0 = (blockIdx.x / (N / BN)) * BM, col0 = (blockIdx.x % (N / BN)) * BN;
  const int wm0 = (warp / WN) * (BM / WM), wn0 = (warp % WN) * (BN / WN);
  const int KT = K / BK;
  float c[TM][TN][4];
  #pragma unroll
  for (int i = 0; i < TM; ++i)
    #pragma unroll
    for (int j = 0; j < TN; ++j)
      #pragma unroll
      for (int e = 0; e < 4; ++e) c[i][j][e] = 0.f;
  #pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    load_stage(as + s * A_STAGE, bs + s * B_STAGE, A, B, row0, col0, s, tid);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }
#ifdef PREFETCH
  unsigned a[2][TM][4], b[2][TN][2];
  asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2) : "memory");
  __syncthreads();
  load_frag(a[0], b[0], as, bs, wm0, wn0, 0, lane);
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % STAGES;
    if (kt + STAGES - 1 < KT) {
      const int w = (kt + STAGES - 1) % STAGES;
      load_stage(as + w * A_STAGE, bs + w * B_STAGE, A, B, row0, col0, kt + STAGES - 1, tid);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    #pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
      if (kk == KSTEPS - 1) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2) : "memory");
        __syncthreads();
        const int s1 = (kt + 1) % STAGES;
        load_frag(a[(kk + 1) % 2], b[(kk + 1) % 2], as + s1 * A_STAGE, bs + s1 * B_STAGE, wm0,
                  wn0, 0, lane);
      } else {
        load_frag(a[(kk + 1) % 2], b[(kk + 1) % 2], as + s * A_STAGE, bs + s * B_STAGE, wm0, wn0,
                  kk + 1, lane);
      }
      mma(c, a[kk % 2], b[kk % 2]);
    }
  }
#else
  unsigned a[TM][4], b[TN][2];
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % STAGES;
    asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2) : "memory");
    __syncthreads();
    if (kt + STAGES - 1 < KT) {
      const int w = (kt + STAGES - 1) % STAGES;
      load_stage(as + w * A_STAGE, bs + w * B_STAGE, A, B, row0, col0, kt + STAGES - 1, tid);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    #pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
      load_frag(a, b, as + s * A_STAGE, bs + s * B_STAGE, wm0, wn0, kk, lane);
      mma(c, a, b);
    }
  }
#endif
  #pragma unroll
  for (int i = 0; i < TM; ++i)
    #pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int r = row0 + wm0 + i * 16 + lane / 4, col = col0 + wn0 + j * 8 + (lane % 4) * 2;
      C[(size_t)r * N + col] = f2h(c[i][j][0]);
      C[(size_t)r * N + col + 1] = f2h(c[i][j][1]);
      C[(size_t)(r + 8) * N + col] = f2h(c[i][j][2]);
      C[(size_t)(r + 8) * N + col + 1] = f2h(c[i][j][3]);
    }
}
