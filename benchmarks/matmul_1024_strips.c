/* 1024^3 as a nest the search cannot write yet: strips of B packed into a buffer the size of
 * an L2, register tiles over all of k, each tile of C stored once (BENCHMARKS.md, "1024^3
 * with B's strips packed for the L2").
 *
 * For each strip of W columns (48 of the last 16), B's 1024 x W strip is copied into one
 * buffer (row-major, W floats a row; with -DPANELS, W/16 panels of 1024 x 16 one after the
 * other), W * 4 KiB: more than the L1, less than an L2. Then for each tile of 6 rows (the
 * last 4), and each 16 columns of the strip, 12 ymm accumulators run all 1024 steps of k
 * (6 broadcasts of A read in place, 2 loads of the buffer, 12 FMAs a step) and are stored
 * once. A's 6 rows (24 KiB) are read from memory once per strip and from the L1 for the
 * strip's other columns.
 *
 *   gcc -O3 -mavx2 -mfma -mtune=znver1 [-DW=48] [-DPANELS] [-DNOPACK] [-DAHEAD] \
 *       benchmarks/matmul_1024_strips.c -ldl -lm && ./a.out [LIBBLAS.so]
 *
 * -DNOPACK copies the strips on the first call only (wrong values after it: the bound
 * without the copies). -DAHEAD keeps two strip buffers and copies the next strip a few rows
 * before each tile of 6 rows, while this one is used. -DN=512 (or 256) for a smaller cube.
 * With a BLAS library as the argument (NumPy's OpenBLAS, say, with
 * OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=Haswell), its cblas_sgemm (or NumPy's
 * scipy_cblas_sgemm64_) runs on the same buffers, in alternating rounds with the nest. The
 * nest's output is checked against a plain triple loop in doubles first. Prints the median
 * time of each over 7 rounds of 5 calls, in GFLOP/s, and the peer's time over the nest's.
 */
#include <dlfcn.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef N
#define N 1024 /* -DN=512 for 512^3 */
#endif
#define NR 16
#ifndef W
#define W 48
#endif
#ifdef PANELS
#define ROW NR                          /* floats from one row of a panel to the next */
#define PANEL(p) ((p) * N * NR)         /* where the panel of columns 16p.. starts */
#else
#define ROW W
#define PANEL(p) ((p) * NR)
#endif

static float strips[2][N * W] __attribute__((aligned(64)));

static inline __attribute__((always_inline)) void tile(int rows, const float *restrict a,
                                                       const float *restrict b, float *restrict c)
{
    __m256 acc[6][2];
    for (int r = 0; r < rows; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int k = 0; k < N; k++) {
        __m256 b0 = _mm256_load_ps(&b[k * ROW]);
        __m256 b1 = _mm256_load_ps(&b[k * ROW + 8]);
        for (int r = 0; r < rows; r++) {
            __m256 x = _mm256_broadcast_ss(&a[r * N + k]);
            acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
        }
    }
    for (int r = 0; r < rows; r++) {
        _mm256_storeu_ps(&c[r * N], acc[r][0]);
        _mm256_storeu_ps(&c[r * N + 8], acc[r][1]);
    }
}

/* Copy rows k0 .. k1 - 1 of the strip of B at column j into buffer s. */
static void copy_rows(float *restrict s, const float *restrict b, int j, int k0, int k1)
{
    int panels = (N - j < W ? N - j : W) / NR;
    for (int k = k0; k < k1; k++)
        for (int p = 0; p < panels; p++) {
            _mm256_store_ps(&s[PANEL(p) + k * ROW], _mm256_loadu_ps(&b[k * N + j + p * NR]));
            _mm256_store_ps(&s[PANEL(p) + k * ROW + 8], _mm256_loadu_ps(&b[k * N + j + p * NR + 8]));
        }
}

static void nest(const float *restrict a, const float *restrict b, float *restrict c)
{
    static int calls = 0;
    calls++;
#ifdef AHEAD
    copy_rows(strips[0], b, 0, 0, N);
#endif
    for (int j = 0, t = 0; j < N; j += W, t ^= 1) {
        int panels = (N - j < W ? N - j : W) / NR;
        float *strip = strips[t];
#ifdef AHEAD
        /* The next strip is copied into the other buffer while this one is used: a few
         * rows before each tile of 6 rows. */
        float *next = strips[t ^ 1];
        int more = j + W < N, per_tile = (N + N / 6 - 1) / (N / 6);
#elif defined NOPACK
        if (calls == 1)
            copy_rows(strip, b, j, 0, N);
#else
        copy_rows(strip, b, j, 0, N);
#endif
        int i = 0;
        for (; i + 6 <= N; i += 6) {
#ifdef AHEAD
            if (more) {
                int k0 = i / 6 * per_tile, k1 = k0 + per_tile < N ? k0 + per_tile : N;
                if (k0 < N)
                    copy_rows(next, b, j + W, k0, k1);
            }
#endif
            for (int p = 0; p < panels; p++)
                tile(6, &a[i * N], &strip[PANEL(p)], &c[i * N + j + p * NR]);
        }
        for (int p = 0; p < panels; p++)
            tile(N - i, &a[i * N], &strip[PANEL(p)], &c[i * N + j + p * NR]);
    }
}

typedef void (*sgemm32)(int, int, int, int, int, int, float, const float *, int, const float *,
                        int, float, float *, int);
typedef void (*sgemm64)(int, int, int, int64_t, int64_t, int64_t, float, const float *, int64_t,
                        const float *, int64_t, float, float *, int64_t);
static sgemm32 peer32;
static sgemm64 peer64;

static void peer(const float *a, const float *b, float *c)
{
    if (peer64)
        peer64(101, 111, 111, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
    else
        peer32(101, 111, 111, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int by_value(const void *x, const void *y)
{
    double u = *(const double *)x, v = *(const double *)y;
    return (u > v) - (u < v);
}

static double timed(void (*f)(const float *, const float *, float *), const float *a,
                    const float *b, float *c)
{
    double t[5];
    for (int r = 0; r < 5; r++) {
        double s = now();
        f(a, b, c);
        t[r] = now() - s;
    }
    qsort(t, 5, sizeof t[0], by_value);
    return t[2];
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        void *lib = dlopen(argv[1], RTLD_NOW);
        if (!lib) {
            fprintf(stderr, "%s\n", dlerror());
            return 2;
        }
        peer64 = (sgemm64)dlsym(lib, "scipy_cblas_sgemm64_");
        peer32 = (sgemm32)dlsym(lib, "cblas_sgemm");
        if (!peer64 && !peer32) {
            fprintf(stderr, "%s exports no cblas_sgemm\n", argv[1]);
            return 2;
        }
    }
    float *a = aligned_alloc(64, sizeof(float) * N * N);
    float *b = aligned_alloc(64, sizeof(float) * N * N);
    float *c = aligned_alloc(64, sizeof(float) * N * N);
    srand(1);
    for (int i = 0; i < N * N; i++) {
        a[i] = (float)rand() / RAND_MAX - 0.5f;
        b[i] = (float)rand() / RAND_MAX - 0.5f;
    }
    nest(a, b, c);
    for (int i = 0; i < N; i += 97)
        for (int j = 0; j < N; j += 89) {
            double s = 0;
            for (int k = 0; k < N; k++)
                s += (double)a[i * N + k] * b[k * N + j];
            if (fabs(s - c[i * N + j]) > 1e-3) {
                fprintf(stderr, "wrong: c[%d][%d] = %g, not %g\n", i, j, c[i * N + j], s);
                return 1;
            }
        }
    double ours[7], theirs[7];
    for (int round = 0; round < 7; round++) {
        ours[round] = timed(nest, a, b, c);
        theirs[round] = (peer32 || peer64) ? timed(peer, a, b, c) : 0;
    }
    qsort(ours, 7, sizeof ours[0], by_value);
    qsort(theirs, 7, sizeof theirs[0], by_value);
    double flop = 2.0 * N * N * N;
    printf("nest %.1f GFLOP/s", flop / ours[3] / 1e9);
    if (peer32 || peer64)
        printf(", peer %.1f GFLOP/s, peer time / nest time %.3f", flop / theirs[3] / 1e9,
               theirs[3] / ours[3]);
    printf("\n");
    return 0;
}
