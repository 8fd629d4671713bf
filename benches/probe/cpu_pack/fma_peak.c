// One core's FMA rate on the host CPU (issue 16): 24 independent AVX-512 FMA chains,
// 200M FMAs of 16 lanes; what a register-tiled kernel could reach on one thread.
//   gcc -O3 -march=native benches/probe/cpu_pack/fma_peak.c -o /tmp/fma_peak && /tmp/fma_peak
#include <stdio.h>
#include <time.h>
#include <immintrin.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(){
  __m512 acc[24]; for(int i=0;i<24;i++) acc[i]=_mm512_set1_ps(i*1e-3f);
  __m512 a=_mm512_set1_ps(1.0000001f), b=_mm512_set1_ps(1e-7f);
  long iters=200000000/24; double t0=now();
  for(long it=0; it<iters; it++){
    #pragma GCC unroll 24
    for(int i=0;i<24;i++) acc[i]=_mm512_fmadd_ps(acc[i],a,b);
  }
  double t=now()-t0; float s=0; for(int i=0;i<24;i++) s+=_mm512_reduce_add_ps(acc[i]);
  printf("%.1f GFLOP/s one core (%g)\n", iters*24.0*32/t/1e9, s);
}
