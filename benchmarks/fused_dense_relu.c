/* A dense layer y = relu(x w + b), x: 128x512, w: 512x512, b: 512, written by hand with the
 * matmul's output tile kept in registers across all of K (the register-level fusion of
 * issue 14), for benchmarks/fused_dense_relu.py to time against the program Morello picks.
 *
 * Per 24-column panel of w: the panel is copied into a contiguous 512x24 buffer (48 KiB:
 * more than a 32 KiB L1, so it is read from L2 by every row tile). Per 4-row tile: 12 ymm
 * accumulators over k = 0..511, then the bias added and ReLU applied in registers, and each
 * output stored once. The last 8 columns (512 = 21 x 24 + 8) go in tiles of 8 rows by one
 * register, reading w in place. Compiled with zen1's flags.
 */
#include <immintrin.h>

#define M 128
#define K 512
#define N 512
#define NR 24

void fused(const float *restrict x, const float *restrict w, const float *restrict b,
           float *restrict y)
{
    static float panel[K * NR] __attribute__((aligned(64)));
    const __m256 zero = _mm256_setzero_ps();
    int j0 = 0;
    for (; j0 + NR <= N; j0 += NR) {
        for (int k = 0; k < K; k++)
            for (int v = 0; v < NR / 8; v++)
                _mm256_store_ps(&panel[NR * k + 8 * v], _mm256_loadu_ps(&w[N * k + j0 + 8 * v]));
        const __m256 b0 = _mm256_loadu_ps(&b[j0]);
        const __m256 b1 = _mm256_loadu_ps(&b[j0 + 8]);
        const __m256 b2 = _mm256_loadu_ps(&b[j0 + 16]);
        for (int i0 = 0; i0 < M; i0 += 4) {
            __m256 acc[4][3];
            for (int r = 0; r < 4; r++)
                acc[r][0] = acc[r][1] = acc[r][2] = zero;
            const float *xr = &x[K * i0];
            for (int k = 0; k < K; k++) {
                const __m256 p0 = _mm256_load_ps(&panel[NR * k]);
                const __m256 p1 = _mm256_load_ps(&panel[NR * k + 8]);
                const __m256 p2 = _mm256_load_ps(&panel[NR * k + 16]);
                for (int r = 0; r < 4; r++) {
                    const __m256 a = _mm256_set1_ps(xr[K * r + k]);
                    acc[r][0] = _mm256_fmadd_ps(a, p0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(a, p1, acc[r][1]);
                    acc[r][2] = _mm256_fmadd_ps(a, p2, acc[r][2]);
                }
            }
            for (int r = 0; r < 4; r++) {
                float *yr = &y[N * (i0 + r) + j0];
                _mm256_storeu_ps(yr, _mm256_max_ps(_mm256_add_ps(acc[r][0], b0), zero));
                _mm256_storeu_ps(yr + 8, _mm256_max_ps(_mm256_add_ps(acc[r][1], b1), zero));
                _mm256_storeu_ps(yr + 16, _mm256_max_ps(_mm256_add_ps(acc[r][2], b2), zero));
            }
        }
    }
    for (; j0 < N; j0 += 8) {
        const __m256 bias = _mm256_loadu_ps(&b[j0]);
        for (int i0 = 0; i0 < M; i0 += 8) {
            __m256 acc[8];
            for (int r = 0; r < 8; r++)
                acc[r] = zero;
            for (int k = 0; k < K; k++) {
                const __m256 p = _mm256_loadu_ps(&w[N * k + j0]);
                for (int r = 0; r < 8; r++)
                    acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(x[K * (i0 + r) + k]), p, acc[r]);
            }
            for (int r = 0; r < 8; r++)
                _mm256_storeu_ps(&y[N * (i0 + r) + j0],
                                 _mm256_max_ps(_mm256_add_ps(acc[r], bias), zero));
        }
    }
}
