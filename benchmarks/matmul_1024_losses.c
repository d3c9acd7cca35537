/* Where zen1's 1024^3 program loses time: its loop nest, written by hand, with switches that
 * take one source of memory traffic away at a time (BENCHMARKS.md, "Where 1024^3 loses").
 *
 * The nest is the one the search picks (columns of 24 except the last 16, which are left
 * out here): for each strip of 24 columns and each block of 256 steps of k, a 256x24 panel
 * of B is packed into a buffer; then for each of 256 tiles of 4 rows, the 4x24 tile of C is
 * loaded into 12 registers, 256 steps of 4 broadcasts of A and 12 FMAs run, and the tile is
 * stored. C starts at zero (the program's fill pass is not timed here).
 *
 *   gcc -O3 -mavx2 -mfma -mtune=znver1 [switches] benchmarks/matmul_1024_losses.c && ./a.out
 *
 * Switches:
 *   -DLDA=1040, -DLDC=1040   pad the rows of A or C (1024 floats is 4 KiB: rows of a tile
 *                            fall in the same L1 sets)
 *   -DA_TILES=1              every row tile reads the first 4 rows of A (A stays in L1);
 *                            -DA_TILES=64 the first 256 rows (1 MiB: the L2)
 *   -DB_FIXED                every panel is packed from the first one (B stays cached)
 *   -DC_FIXED                every row tile accumulates into the first tile of C
 *   -DPACK_A                 A read from 4-row panels packed beforehand (not timed), in
 *                            the order the nest reads them: for each block of 256 steps of
 *                            k, the 256 tiles of 4x256 one after another (1 MiB in one run)
 *   -DPACK_GLOBAL            the same panels in plain 4-row order (each 4x1024 panel whole,
 *                            so a block's tiles are 4 KiB runs 16 KiB apart)
 *   -DPACK_IN                with either: the packing inside the timed call
 *   -DPREFETCH_C             prefetch the next tile of C before each tile's k loop
 * Prints the median of 15 calls, in GFLOP/s.
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef LDA
#define LDA 1024
#endif
#ifndef LDC
#define LDC 1024
#endif
#ifndef A_TILES
#define A_TILES 256
#endif
#define N 1024
#define KB 256
#define STRIPS 42 /* 42 strips of 24 columns: 1008 of the 1024 */

/* A into 4-row panels: for each k, the 4 values of a tile's rows side by side. */
static void pack(const float *a, float *apk)
{
#if defined(PACK_GLOBAL)
    for (int t = 0; t < 256; t++)
        for (int k = 0; k < N; k++)
            for (int r = 0; r < 4; r++)
                apk[(size_t)t * 4 * N + 4 * k + r] = a[(size_t)(4 * t + r) * LDA + k];
#else
    for (int kb = 0; kb < N / KB; kb++)
        for (int t = 0; t < 256; t++)
            for (int k = 0; k < KB; k++)
                for (int r = 0; r < 4; r++)
                    apk[((size_t)kb * 256 + t) * 4 * KB + 4 * k + r] =
                        a[(size_t)(4 * t + r) * LDA + KB * kb + k];
#endif
}

static void nest(const float *restrict a, const float *restrict b, float *restrict c,
                 float *restrict apk)
{
#ifdef PACK_IN
    pack(a, apk);
#endif
    for (int s = 0; s < STRIPS; s++) {
        for (int kb = 0; kb < N / KB; kb++) {
            float panel[KB * 24] __attribute__((aligned(64)));
#ifdef B_FIXED
            const float *bp = b;
#else
            const float *bp = &b[24 * s + N * KB * kb];
#endif
            for (int k = 0; k < KB; k++)
                for (int j = 0; j < 3; j++)
                    _mm256_storeu_ps(&panel[24 * k + 8 * j], _mm256_loadu_ps(&bp[N * k + 8 * j]));
            for (int t = 0; t < 256; t++) {
#ifdef C_FIXED
                float *ct = c;
#else
                float *ct = &c[24 * s + 4 * LDC * t];
#endif
                __m256 acc[4][3];
                for (int r = 0; r < 4; r++)
                    for (int j = 0; j < 3; j++) acc[r][j] = _mm256_loadu_ps(&ct[LDC * r + 8 * j]);
#ifdef PREFETCH_C
                for (int r = 0; r < 4; r++) {
                    const char *next = (const char *)&ct[4 * LDC + LDC * r];
                    _mm_prefetch(next, _MM_HINT_T0);
                    _mm_prefetch(next + 95, _MM_HINT_T0);
                }
#endif
                int at = t % A_TILES;
#if defined(PACK_GLOBAL)
                const float *ap = &apk[(size_t)at * 4 * N + 4 * KB * kb];
#define A_AT(r, k) ap[4 * (k) + (r)]
#elif defined(PACK_A)
                const float *ap = &apk[((size_t)kb * 256 + at) * 4 * KB];
#define A_AT(r, k) ap[4 * (k) + (r)]
#else
                const float *ap = &a[KB * kb + 4 * LDA * at];
#define A_AT(r, k) ap[LDA * (r) + (k)]
#endif
                for (int k = 0; k < KB; k++) {
                    __m256 b0 = _mm256_loadu_ps(&panel[24 * k]);
                    __m256 b1 = _mm256_loadu_ps(&panel[24 * k + 8]);
                    __m256 b2 = _mm256_loadu_ps(&panel[24 * k + 16]);
                    for (int r = 0; r < 4; r++) {
                        __m256 x = _mm256_set1_ps(A_AT(r, k));
                        acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
                        acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
                        acc[r][2] = _mm256_fmadd_ps(x, b2, acc[r][2]);
                    }
                }
                for (int r = 0; r < 4; r++)
                    for (int j = 0; j < 3; j++) _mm256_storeu_ps(&ct[LDC * r + 8 * j], acc[r][j]);
            }
        }
    }
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(void)
{
    float *a = aligned_alloc(64, sizeof(float) * LDA * N);
    float *b = aligned_alloc(64, sizeof(float) * N * N);
    float *c = aligned_alloc(64, sizeof(float) * LDC * N);
    float *apk = aligned_alloc(64, sizeof(float) * N * N);
    for (long i = 0; i < (long)LDA * N; i++) a[i] = (float)(i % 7) * 0.1f;
    for (long i = 0; i < (long)N * N; i++) b[i] = (float)(i % 5) * 0.1f;
    memset(c, 0, sizeof(float) * LDC * N);
    pack(a, apk);
    double times[15];
    for (int i = 0; i < 15; i++) {
        double start = now();
        nest(a, b, c, apk);
        times[i] = now() - start;
    }
    qsort(times, 15, sizeof(double), by_value);
    printf("%.1f GFLOP/s\n", 2.0 * N * (24.0 * STRIPS) * N / times[7] * 1e-9);
    return 0;
}
