// Harness of pack_a.sh: k_orig and k_pack (pack_a.py) on the same 1024^3 inputs, checked
// against each other, then called alternately REPS times; the best and mean of each.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
void k_orig(float *restrict, float *restrict, float *restrict);
void k_pack(float *restrict, float *restrict, float *restrict);
int main(int argc, char **argv) {
  int n = 1024, reps = argc > 1 ? atoi(argv[1]) : 40;
  float *a = aligned_alloc(64, n * n * 4), *b = aligned_alloc(64, n * n * 4);
  float *c1 = aligned_alloc(64, n * n * 4), *c2 = aligned_alloc(64, n * n * 4);
  for (int i = 0; i < n * n; i++) {
    a[i] = rand() / (float)RAND_MAX - .5f;
    b[i] = rand() / (float)RAND_MAX - .5f;
  }
  k_orig(a, b, c1);
  k_pack(a, b, c2);
  double diff = 0;
  for (int i = 0; i < n * n; i++) diff = fmax(diff, fabs(c1[i] - c2[i]));
  double best[2] = {1e9, 1e9}, sum[2] = {0, 0};
  for (int r = 0; r < reps; r++)
    for (int k = 0; k < 2; k++) {
      double t = omp_get_wtime();
      (k ? k_pack : k_orig)(a, b, k ? c2 : c1);
      t = omp_get_wtime() - t;
      best[k] = fmin(best[k], t);
      sum[k] += t;
    }
  double gf = 2.0 * n * n * n / 1e9;
  printf("threads %d  max |orig - pack| %g  orig best %.2f ms (%.1f GFLOP/s) mean %.2f  "
         "pack best %.2f ms (%.1f GFLOP/s) mean %.2f  pack/orig by best %.3f\n",
         omp_get_max_threads(), diff, best[0] * 1e3, gf / best[0], sum[0] / reps * 1e3,
         best[1] * 1e3, gf / best[1], sum[1] / reps * 1e3, best[0] / best[1]);
}
