// A Hopper wgmma GEMM probe: C = A x B, f16 in, f32 accumulators, f16 out.
//   A: M x K row-major (K-major for wgmma), B: K x N row-major (N-major, imm-trans-b = 1),
//   C: M x N row-major. benches/cuda_probe.py compiles it with NVRTC (sm_90a) and times it.
// Structure: block BM x BN (BM = 128: two consumer warpgroups, each a 64 x BN slab), BK = 64,
// STAGES shared stages filled by 16-byte cp.async.cg (every thread copies, no TMA, no warp
// specialisation), both operands read by wgmma.mma_async m64nBNk16 through shared-memory
// descriptors with the 128-byte swizzle:
//   A stage: BM rows of 64 f16 (128 B); row r, 16-byte chunk c at r*128 + ((c ^ r%8) * 16);
//            8 rows form one 1024-byte swizzle atom. Descriptor: LBO unused (1), SBO = 1024;
//            k16 step j: start address + 32*j bytes.
//   B stage: [BN/64 n chunks][BK k rows][64 n] f16; k row r of n chunk j, chunk c (n%64 / 8)
//            at j*LBO + r*128 + ((c ^ r%8) * 16), LBO = BK*128 = 8192 (next 64-wide n chunk),
//            SBO = 1024 (next 8 k rows); k16 step j: start address + 2048*j bytes.
// benches/probe/swizzle_check.py checks these addresses against the PTX ISA canonical layouts.
// Pipeline (WG_INFLIGHT = 1): tile kt+D is copied while wgmma reads tile kt and tile kt-1 may
// still be in flight, D = STAGES - 1 - WG_INFLIGHT; the stage refilled in iteration kt held
// tile kt-1-WG_INFLIGHT, which every warpgroup finished (wgmma.wait_group WG_INFLIGHT in
// iteration kt-1) before the __syncthreads of iteration kt.
// M, N, K must be multiples of BM, BN, BK.
// launch: grid=(512, 1, 1) block=(256, 1, 1) shared=197632 bytes (dynamic)
// problem: m=4096 n=4096 k=4096 dtype=f16
#ifndef M
#define M 4096
#endif
#ifndef N
#define N 4096
#endif
#ifndef K
#define K 4096
#endif
#ifndef BN
#define BN 256  // 256 (m64n256k16) or 128 (m64n128k16)
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef WG_INFLIGHT
#define WG_INFLIGHT 1  // wgmma groups left in flight across iterations: 0 or 1
#endif
#ifndef GROUP_M
#define GROUP_M 8  // block raster: GROUP_M row tiles sweep N together (L2 reuse)
#endif
#define BM 128
#define BK 64
#define THREADS 256
#define NACC (BN / 2)                   // f32 accumulators a thread
#define A_STAGE_BYTES (BM * BK * 2)     // 16384
#define B_STAGE_BYTES (BK * BN * 2)     // 32768 for BN = 256
#define STAGE_BYTES (A_STAGE_BYTES + B_STAGE_BYTES)
#define B_LBO (BK * 128)                // bytes between 64-wide n chunks of a B stage
#define SW_SBO 1024                     // bytes between 8-row groups (one swizzle atom)
#define PREFETCH (STAGES - 1 - WG_INFLIGHT)
// shared = STAGES * STAGE_BYTES + 1024 (slack to round the base up to 1024 bytes)

#if BN != 256 && BN != 128
#error "BN must be 256 or 128"
#endif
#if PREFETCH < 1
#error "STAGES must be at least WG_INFLIGHT + 2"
#endif
#if (M % BM) || (N % BN) || (K % BK)
#error "M, N, K must be multiples of the block tile"
#endif

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}
// Ties the accumulator registers to this point so that the compiler neither hoists reads of
// them above a wgmma.wait_group nor sinks writes below a wgmma issue.
__device__ __forceinline__ void fence_acc(float* d) {
  #pragma unroll
  for (int i = 0; i < NACC; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// 64-bit wgmma shared-memory descriptor: bits 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4,
// 49-51 base offset (0: every atom starts on a 1024-byte boundary), 62-63 swizzle (1 = 128 B).
__device__ __forceinline__ unsigned long long make_desc(unsigned saddr, unsigned lbo, unsigned sbo) {
  unsigned lo = ((saddr & 0x3FFFF) >> 4) | (((lbo & 0x3FFFF) >> 4) << 16);
  unsigned hi = ((sbo & 0x3FFFF) >> 4) | (1u << 30);
  return ((unsigned long long)hi << 32) | lo;
}
__device__ __forceinline__ unsigned pack_f16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));  // a -> upper half
  return r;
}

#if BN == 256
__device__ __forceinline__ void wgmma_m64n256k16(float* d, unsigned long long da, unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, 0, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db), "r"(1));
}
#else
__device__ __forceinline__ void wgmma_m64n128k16(float* d, unsigned long long da, unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(1));
}
#endif

extern "C" __global__ void __launch_bounds__(256, 1) wgmma_gemm(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B, unsigned short* __restrict__ C) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const unsigned smem_raw = smem_u32(smem);
  const unsigned sbase = (smem_raw + 1023u) & ~1023u;  // swizzle atoms on 1024-byte boundaries

  const int tid = threadIdx.x;
  const int wg = tid / 128;  // consumer warpgroup: rows 64*wg .. 64*wg+63 of the block tile

  // Block raster: groups of GROUP_M row tiles, row tile fastest inside a group.
  const int tiles_m = M / BM, tiles_n = N / BN;
  const int bid = blockIdx.x;
  const int per_group = GROUP_M * tiles_n;
  const int first_m = (bid / per_group) * GROUP_M;
  const int gsz = (tiles_m - first_m) < GROUP_M ? (tiles_m - first_m) : GROUP_M;
  const int bm = first_m + (bid % per_group) % gsz;
  const int bn = (bid % per_group) / gsz;

  // Copy assignment. A: BM rows x 8 chunks, chunk id i = tid + 256*p -> row i/8, chunk i%8.
  // B: BK rows x BN/8 chunks, i = tid + 256*p -> k row i/(BN/8), n chunk i%(BN/8).
  const int a_row = tid / 8, a_c = tid % 8;                    // + 32 rows per p
  const unsigned short* a_src = A + (size_t)(bm * BM + a_row) * K + a_c * 8;
  const unsigned a_dst = a_row * 128 + ((a_c ^ (a_row & 7)) * 16);  // (a_row+32p)&7 == a_row&7
  const int b_row = tid / (BN / 8), b_cn = tid % (BN / 8);     // + 256/(BN/8) rows per p
  const unsigned short* b_src = B + (size_t)b_row * N + bn * BN + b_cn * 8;
  const unsigned b_dst = (b_cn / 8) * B_LBO + b_row * 128 + (((b_cn & 7) ^ (b_row & 7)) * 16);
  constexpr int A_ITERS = BM * BK / 8 / THREADS;               // 4
  constexpr int B_ITERS = BK * BN / 8 / THREADS;               // 8 (BN 256) or 4
  constexpr int B_ROWS_PER_ITER = THREADS / (BN / 8);          // 8 or 16: keeps row & 7

  auto load_tile = [&](int stage, int kt) {
    const unsigned sa = sbase + stage * STAGE_BYTES;
    const unsigned sb = sa + A_STAGE_BYTES;
    const unsigned short* ga = a_src + kt * BK;
    #pragma unroll
    for (int p = 0; p < A_ITERS; ++p)
      cp_async16(sa + a_dst + p * 32 * 128, ga + (size_t)p * 32 * K);
    const unsigned short* gb = b_src + (size_t)kt * BK * N;
    #pragma unroll
    for (int p = 0; p < B_ITERS; ++p)
      cp_async16(sb + b_dst + p * B_ROWS_PER_ITER * 128, gb + (size_t)p * B_ROWS_PER_ITER * N);
  };

  float d[NACC];
  #pragma unroll
  for (int i = 0; i < NACC; ++i) d[i] = 0.f;

  // Descriptors of stage 0 for this warpgroup; stage s adds s*STAGE_BYTES >> 4 to the start.
  const unsigned long long desc_a0 = make_desc(sbase + wg * 64 * 128, 16, SW_SBO);
  const unsigned long long desc_b0 = make_desc(sbase + A_STAGE_BYTES, B_LBO, SW_SBO);

  constexpr int KT = K / BK;
  #pragma unroll
  for (int s = 0; s < PREFETCH; ++s) {
    if (s < KT) load_tile(s, s);
    cp_async_commit();
  }

  #pragma unroll 1
  for (int kt = 0; kt < KT; ++kt) {
    const int stage = kt % STAGES;
    cp_async_wait<PREFETCH - 1>();  // this thread's copies of tile kt landed
    fence_proxy_async();            // make them visible to the async proxy (wgmma)
    __syncthreads();                // everyone's copies landed; tile kt-1-WG_INFLIGHT retired

    const unsigned long long soff = (unsigned long long)((stage * STAGE_BYTES) >> 4);
    const unsigned long long da = desc_a0 + soff, db = desc_b0 + soff;
    fence_acc(d);
    wgmma_fence();
    #pragma unroll
    for (int j = 0; j < BK / 16; ++j) {
#if BN == 256
      wgmma_m64n256k16(d, da + (unsigned long long)(j * 32 >> 4),
                       db + (unsigned long long)(j * 16 * 128 >> 4));
#else
      wgmma_m64n128k16(d, da + (unsigned long long)(j * 32 >> 4),
                       db + (unsigned long long)(j * 16 * 128 >> 4));
#endif
    }
    wgmma_commit();

    const int nt = kt + PREFETCH;   // refills stage (kt - 1 - WG_INFLIGHT) % STAGES
    if (nt < KT) load_tile(nt % STAGES, nt);
    cp_async_commit();              // always, to keep the group count per iteration fixed

    wgmma_wait<WG_INFLIGHT>();
    fence_acc(d);
  }
  wgmma_wait<0>();
  fence_acc(d);
  cp_async_wait<0>();

  // Epilogue. Accumulator layout of m64nNk16 (f32): warp w of the warpgroup, lane l:
  // d[4c + 2h + e] is row 16w + l/4 + 8h, column 8c + 2(l%4) + e.
  const int warp = (tid % 128) / 32, lane = tid % 32;
  const int row = bm * BM + wg * 64 + warp * 16 + lane / 4;
  const int col = bn * BN + 2 * (lane % 4);
  unsigned* c0 = (unsigned*)(C + (size_t)row * N + col);
  unsigned* c1 = (unsigned*)(C + (size_t)(row + 8) * N + col);
  #pragma unroll
  for (int c = 0; c < BN / 8; ++c) {
    c0[c * 4] = pack_f16x2(d[4 * c + 0], d[4 * c + 1]);  // 8 columns = 4 unsigneds
    c1[c * 4] = pack_f16x2(d[4 * c + 2], d[4 * c + 3]);
  }
}
