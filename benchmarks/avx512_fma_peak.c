/* The one-core AVX-512 FMA peak: 24 independent chains of vfmadd231ps on zmm registers
 * (enough to cover 2 FMA ports x 4 cycles of latency), 2 x 16 x 2 = 64 flop per cycle at
 * most. Prints the best of 20 timed runs in GFLOP/s.
 *
 *     gcc -O2 -mavx512f -o /tmp/avx512_fma_peak benchmarks/avx512_fma_peak.c && /tmp/avx512_fma_peak
 */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

#define CHAINS 24
#define STEPS 2000000L

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void) {
    __m512 acc[CHAINS];
    const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(0.001f);
    double best = 1e30;
    float sink = 0.0f;
    for (int run = 0; run < 20; run++) {
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
        double t = now();
        for (long s = 0; s < STEPS; s++) {
#pragma GCC unroll 24
            for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
        }
        t = now() - t;
        if (t < best) best = t;
        for (int i = 0; i < CHAINS; i++) sink += _mm512_reduce_add_ps(acc[i]);
    }
    double flops = 2.0 * 16 * CHAINS * (double)STEPS;
    printf("AVX-512 FMA peak: %.1f GFLOP/s (best of 20, %d chains; sink %g)\n",
           flops / best * 1e-9, CHAINS, (double)sink);
    return 0;
}
