/* What copying B's panels costs zen1's 32x2048x512 program, and how much of it hides when
 * each trip copies the next panel while it computes (BENCHMARKS.md, "A loop copies its next
 * panel ahead"; docs/design-notes.md).
 *
 * The nest is the one the search picks, written by hand (the last 8 columns left out): for
 * each block of 128 steps of k, the 32x128 block of A is packed; for each of 21 strips of 24
 * columns, the 128x24 panel of B is packed; then for each of 8 tiles of 4 rows, the 4x24
 * tile of C is loaded into 12 registers (zero in the first block), 128 steps of 4
 * broadcasts and 12 FMAs run, and the tile is stored.
 *
 *   gcc -O3 -mavx2 -mfma -mtune=znver1 [switch] benchmarks/panel_copies.c && ./a.out
 *
 * Switches (none: the panels copied in a pass at the start of each strip, as before):
 *   -DCOPY_ONCE       only the first panel is copied; every strip reads it (wrong values,
 *                     no copying cost: the bound)
 *   -DB_FIXED         every panel is copied from the first one's place (B stays cached)
 *   -DAHEAD_BURST     two panels; each tile copies 16 rows of the next panel before its k loop
 *   -DAHEAD_ROWS      two panels; one row of the next panel every 8 steps of the k loop
 *                     (what the code generator now writes)
 * Checks the result against a double-precision product (except with COPY_ONCE and B_FIXED),
 * then prints the median of 101 calls, three times, in GFLOP/s.
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define M 32
#define K 2048
#define N 512
#define STRIPS 21 /* of 24 columns: 504 of the 512 */

static void copy_rows(float *restrict dst, const float *restrict src, int from, int to)
{
    for (int k = from; k < to; k++)
        for (int j = 0; j < 3; j++) _mm256_storeu_ps(&dst[24 * k + 8 * j], _mm256_loadu_ps(&src[N * k + 8 * j]));
}

static const float *panel_of(const float *b, int kb, int s)
{
#if defined(B_FIXED) || defined(COPY_ONCE)
    (void)kb, (void)s;
    return b;
#else
    return &b[N * 128 * kb + 24 * s];
#endif
}

static void nest(const float *restrict a, const float *restrict b, float *restrict c)
{
    float ta[M * 128] __attribute__((aligned(64)));
    float tb[2][128 * 24] __attribute__((aligned(64)));
    int now = 0;
#if defined(AHEAD_BURST) || defined(AHEAD_ROWS)
    copy_rows(tb[0], panel_of(b, 0, 0), 0, 128);
#endif
    for (int kb = 0; kb < K / 128; kb++) {
        for (int i = 0; i < M; i++)
            for (int k = 0; k < 128; k += 8) _mm256_storeu_ps(&ta[128 * i + k], _mm256_loadu_ps(&a[K * i + 128 * kb + k]));
        for (int s = 0; s < STRIPS; s++) {
            int ns = s + 1, nkb = kb;
            if (ns == STRIPS) ns = 0, nkb++;
            const float *next = nkb < K / 128 ? panel_of(b, nkb, ns) : 0;
            float *ahead = tb[now ^ 1];
            (void)next, (void)ahead;
#if !defined(AHEAD_BURST) && !defined(AHEAD_ROWS)
#ifdef COPY_ONCE
            if (kb == 0 && s == 0)
#endif
                copy_rows(tb[now], panel_of(b, kb, s), 0, 128);
#endif
            const float *pb = tb[now];
            for (int t = 0; t < M / 4; t++) {
                __m256 acc[4][3];
                float *ct = &c[24 * s + 4 * N * t];
                for (int r = 0; r < 4; r++)
                    for (int j = 0; j < 3; j++) acc[r][j] = kb ? _mm256_loadu_ps(&ct[N * r + 8 * j]) : _mm256_setzero_ps();
                const float *ap = &ta[512 * t];
#ifdef AHEAD_BURST
                if (next) copy_rows(ahead, next, 16 * t, 16 * t + 16);
#endif
                for (int k = 0; k < 128; k++) {
#ifdef AHEAD_ROWS
                    if (next && (k & 7) == 0) copy_rows(ahead, next, 16 * t + (k >> 3), 16 * t + (k >> 3) + 1);
#endif
                    __m256 b0 = _mm256_loadu_ps(&pb[24 * k]), b1 = _mm256_loadu_ps(&pb[24 * k + 8]);
                    __m256 b2 = _mm256_loadu_ps(&pb[24 * k + 16]);
                    for (int r = 0; r < 4; r++) {
                        __m256 x = _mm256_set1_ps(ap[128 * r + k]);
                        acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
                        acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
                        acc[r][2] = _mm256_fmadd_ps(x, b2, acc[r][2]);
                    }
                }
                for (int r = 0; r < 4; r++)
                    for (int j = 0; j < 3; j++) _mm256_storeu_ps(&ct[N * r + 8 * j], acc[r][j]);
            }
#if defined(AHEAD_BURST) || defined(AHEAD_ROWS)
            now ^= 1;
#endif
        }
    }
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int by_value(const void *x, const void *y)
{
    double p = *(const double *)x, q = *(const double *)y;
    return (p > q) - (p < q);
}

int main(void)
{
    float *a = aligned_alloc(64, 4 * M * K), *b = aligned_alloc(64, 4L * K * N), *c = aligned_alloc(64, 4 * M * N);
    for (long i = 0; i < M * K; i++) a[i] = (float)(i % 7) * 0.1f - 0.3f;
    for (long i = 0; i < (long)K * N; i++) b[i] = (float)(i % 5) * 0.1f - 0.2f;
    nest(a, b, c);
#if !defined(COPY_ONCE) && !defined(B_FIXED)
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < 24 * STRIPS; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)a[K * i + k] * b[(long)N * k + j];
            double e = c[N * i + j] - s;
            worst = e > worst ? e : -e > worst ? -e : worst;
        }
    if (worst > 1e-3) {
        printf("wrong: largest difference %g\n", worst);
        return 1;
    }
#endif
    for (int round = 0; round < 3; round++) {
        double t[101];
        for (int i = 0; i < 101; i++) {
            double start = seconds();
            nest(a, b, c);
            t[i] = seconds() - start;
        }
        qsort(t, 101, sizeof t[0], by_value);
        printf("%.1f GFLOP/s (%.1f us)\n", 2.0 * M * K * 24 * STRIPS / t[50] * 1e-9, t[50] * 1e6);
    }
    return 0;
}
