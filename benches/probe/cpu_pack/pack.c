// What packing a conv's weights once per call costs on the host CPU (issue 16): the
// weights of an NCHW conv c256 k256 3x3, [k][c*r*s] = 256 x 2304 floats (2.4 MB),
// stored [c*r*s][k], as the register-tile sketch's `panel_at = "call"` packs them:
//   0  element by element in the stored order (contiguous reads, writes a row apart),
//      as the pack was scheduled first (11ec20a)
//   1  element by element in the packed order (contiguous writes, reads a row apart)
//   2  16 x 16 tiles, the tiles parallel (`sketch::cpu::transpose_pack`, daa2452)
// Best of 50 calls each, OpenMP threads as OMP_NUM_THREADS says.
//   gcc -O3 -march=native -fopenmp benches/probe/cpu_pack/pack.c -o /tmp/pack
//   OMP_NUM_THREADS=2 /tmp/pack
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { K = 256, CRS = 2304, N = K * CRS, T = 16 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pack(int variant, const float *w, float *p) {
  if (variant == 0) {
#pragma omp parallel for
    for (int f = 0; f < N; f++) p[(f % CRS) * K + f / CRS] = w[f];
  } else if (variant == 1) {
#pragma omp parallel for
    for (int f = 0; f < N; f++) p[f] = w[(f % K) * CRS + f / K];
  } else {
#pragma omp parallel for
    for (int tile = 0; tile < (CRS / T) * (K / T); tile++) {
      int a0 = tile / (K / T), k0 = tile % (K / T);
      for (int k1 = 0; k1 < T; k1++)
        for (int a1 = 0; a1 < T; a1++)
          p[(a0 * T + a1) * K + k0 * T + k1] = w[(k0 * T + k1) * CRS + a0 * T + a1];
    }
  }
}

int main(void) {
  float *w = malloc(sizeof(float) * N), *p = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++) w[i] = (float)i;
  for (int variant = 0; variant < 3; variant++) {
    double best = 1e9;
    for (int rep = 0; rep < 50; rep++) {
      double t0 = now();
      pack(variant, w, p);
      double t = now() - t0;
      if (t < best) best = t;
    }
    int bad = 0;
    for (int k = 0; k < K; k++)
      for (int a = 0; a < CRS; a++) bad += p[a * K + k] != w[k * CRS + a];
    printf("variant %d: %.3f ms%s\n", variant, best * 1e3, bad ? " (WRONG)" : "");
  }
  return 0;
}
