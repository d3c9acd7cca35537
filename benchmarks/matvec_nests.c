/* Hand-written loop nests for the f32 matvec y = x w (x: 1 x 2048, w: 2048 x 16384), the
 * experiment behind "The f32 matvec: a nest the model cannot rank" in BENCHMARKS.md.
 *
 * Compiled once per nest by benchmarks/matvec_nests.py with
 *   ROWS     rows of w read at once (one broadcast of x each),
 *   COLS     outputs per block (16384: whole rows; y then lives in L2),
 *   VECS     8-float registers of outputs per inner step,
 *   PREFETCH floats ahead to prefetch in each row (0: none),
 *   TURNS    0: each step reads a run of VECS vectors from one row, then the next row;
 *            1: each output register takes the rows in turn, one vector of each (the order
 *            Morello emits since 2026-11-29, "The f32 matvec's order of loads").
 * COLS need not be a multiple of 8 * VECS: the columns left over are done 8 at a time.
 */
#include <immintrin.h>

#define K 2048
#define N 16384
#ifndef TURNS
#define TURNS 0
#endif

void nest(const float *restrict x, const float *restrict w, float *restrict y)
{
    for (int nb = 0; nb < N; nb += COLS) {
        for (int j = 0; j < COLS; j += 8) _mm256_storeu_ps(&y[nb + j], _mm256_setzero_ps());
        for (int k = 0; k < K; k += ROWS) {
            __m256 xs[ROWS];
            for (int r = 0; r < ROWS; r++) xs[r] = _mm256_set1_ps(x[k + r]);
            int j = nb;
            for (; j + 8 * VECS <= nb + COLS; j += 8 * VECS) {
                __m256 acc[VECS];
                for (int v = 0; v < VECS; v++) acc[v] = _mm256_loadu_ps(&y[j + 8 * v]);
#if TURNS
#pragma GCC unroll 16
                for (int v = 0; v < VECS; v++)
#pragma GCC unroll 16
                    for (int r = 0; r < ROWS; r++)
                        acc[v] = _mm256_fmadd_ps(
                            xs[r], _mm256_loadu_ps(&w[(long)(k + r) * N + j + 8 * v]), acc[v]);
#else
#pragma GCC unroll 16
                for (int r = 0; r < ROWS; r++) {
                    const float *row = &w[(long)(k + r) * N + j];
#if PREFETCH
                    for (int p = 0; p < 8 * VECS; p += 16)
                        _mm_prefetch((const char *)(row + PREFETCH + p), _MM_HINT_T0);
#endif
#pragma GCC unroll 16
                    for (int v = 0; v < VECS; v++)
                        acc[v] = _mm256_fmadd_ps(xs[r], _mm256_loadu_ps(row + 8 * v), acc[v]);
                }
#endif
                for (int v = 0; v < VECS; v++) _mm256_storeu_ps(&y[j + 8 * v], acc[v]);
            }
            for (; j < nb + COLS; j += 8) {
                __m256 acc = _mm256_loadu_ps(&y[j]);
                for (int r = 0; r < ROWS; r++)
                    acc = _mm256_fmadd_ps(xs[r], _mm256_loadu_ps(&w[(long)(k + r) * N + j]), acc);
                _mm256_storeu_ps(&y[j], acc);
            }
        }
    }
}
