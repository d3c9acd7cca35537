/* dense_relu's program (examples/dense_relu.lark) as Morello generated it for zen1 on
 * 2026-11-25, with switches around its packing of w, to time what the copies cost
 * (BENCHMARKS.md, "What dense_relu's packing costs"). Per strip of 24 columns, two blocks of
 * 256 steps of k each copy a 256x24 panel of w into L1 in a pass (t1, t2), then run 32 tiles
 * of 4x24 accumulators over it; bias and ReLU follow from the 128x24 block t0. Switches
 * (each alone; time each against the file without one, `benchmarks/ab.py --define-new`):
 *
 *   NOCOPY      the panels are filled for the first strip only (wrong values: the bound)
 *   CACHED      every strip copies its panels from the first strip's columns (the source is
 *               in cache; wrong values)
 *   PREFETCH    each tile prefetches 8 rows of the panel copied next, into L2
 *   FIRST_TILE  no pass: the first tile of each block copies row k of its panel at step k,
 *               before it reads it
 */

#include <immintrin.h>

/* f32[128, 512] @GL row_major = graph:t0=matmul(i0,i1);t1=add/2.1.2(t0,i2);o=relu(t1)(f32[128, 512] @GL row_major, f32[512, 512] @GL row_major, f32[512] @GL row_major) */
void dense_relu(const float *restrict x, const float *restrict w, const float *restrict b, float *restrict y)
{
#if NOCOPY /* the panels outside the loop, filled for the first strip only */
    float t1[6144] __attribute__((aligned(64)));
    float t2[6144] __attribute__((aligned(64)));
#endif
    for (int i0 = 0; i0 < 21; i0++) {
        float t0[3072] __attribute__((aligned(64)));
#if !NOCOPY
        float t1[6144] __attribute__((aligned(64)));
#endif
#if !FIRST_TILE
#if NOCOPY
        if (i0 == 0)
#endif
        for (int i1 = 0; i1 < 256; i1++) {
            for (int i2 = 0; i2 < 3; i2++) {
#if CACHED /* from the first strip's columns each time: a source in cache */
                _mm256_storeu_ps(&t1[8 * i2 + 24 * i1], _mm256_loadu_ps(&w[8 * i2 + 512 * i1]));
#else
                _mm256_storeu_ps(&t1[8 * i2 + 24 * i1], _mm256_loadu_ps(&w[24 * i0 + 8 * i2 + 512 * i1]));
#endif
            }
        }
#endif
        for (int i3 = 0; i3 < 32; i3++) {
#if PREFETCH /* 8 rows of the panel copied next per tile: this strip's second, or the next strip's first */
            for (int p = 0; p < 8; p++) {
                const char *a = (const char *)&w[24 * i0 + 512 * (256 + 8 * i3 + p)];
                _mm_prefetch(a, _MM_HINT_T1);
                _mm_prefetch(a + 64, _MM_HINT_T1);
                _mm_prefetch(a + 95, _MM_HINT_T1);
            }
#endif
            __m256 v0_0, v0_1, v0_2, v0_3, v0_4, v0_5, v0_6, v0_7, v0_8, v0_9, v0_10, v0_11;
            v0_0 = _mm256_setzero_ps();
            v0_1 = _mm256_setzero_ps();
            v0_2 = _mm256_setzero_ps();
            v0_3 = _mm256_setzero_ps();
            v0_4 = _mm256_setzero_ps();
            v0_5 = _mm256_setzero_ps();
            v0_6 = _mm256_setzero_ps();
            v0_7 = _mm256_setzero_ps();
            v0_8 = _mm256_setzero_ps();
            v0_9 = _mm256_setzero_ps();
            v0_10 = _mm256_setzero_ps();
            v0_11 = _mm256_setzero_ps();
            for (int i4 = 0; i4 < 256; i4++) {
#if FIRST_TILE /* the first tile copies each row of the panel just before it uses it */
                if (i3 == 0)
                    for (int q = 0; q < 3; q++)
                        _mm256_storeu_ps(&t1[8 * q + 24 * i4], _mm256_loadu_ps(&w[24 * i0 + 8 * q + 512 * i4]));
#endif
                __m256 v1_0, v1_1, v1_2;
                v1_0 = _mm256_loadu_ps(&t1[24 * i4]);
                v1_1 = _mm256_loadu_ps(&t1[24 * i4 + 8]);
                v1_2 = _mm256_loadu_ps(&t1[24 * i4 + 16]);
                float r0_0;
                r0_0 = x[i4 + 2048 * i3];
                v0_0 = _mm256_fmadd_ps(_mm256_set1_ps(r0_0), v1_0, v0_0);
                v0_1 = _mm256_fmadd_ps(_mm256_set1_ps(r0_0), v1_1, v0_1);
                v0_2 = _mm256_fmadd_ps(_mm256_set1_ps(r0_0), v1_2, v0_2);
                float r1_0;
                r1_0 = x[i4 + 2048 * i3 + 512];
                v0_3 = _mm256_fmadd_ps(_mm256_set1_ps(r1_0), v1_0, v0_3);
                v0_4 = _mm256_fmadd_ps(_mm256_set1_ps(r1_0), v1_1, v0_4);
                v0_5 = _mm256_fmadd_ps(_mm256_set1_ps(r1_0), v1_2, v0_5);
                float r2_0;
                r2_0 = x[i4 + 2048 * i3 + 1024];
                v0_6 = _mm256_fmadd_ps(_mm256_set1_ps(r2_0), v1_0, v0_6);
                v0_7 = _mm256_fmadd_ps(_mm256_set1_ps(r2_0), v1_1, v0_7);
                v0_8 = _mm256_fmadd_ps(_mm256_set1_ps(r2_0), v1_2, v0_8);
                float r3_0;
                r3_0 = x[i4 + 2048 * i3 + 1536];
                v0_9 = _mm256_fmadd_ps(_mm256_set1_ps(r3_0), v1_0, v0_9);
                v0_10 = _mm256_fmadd_ps(_mm256_set1_ps(r3_0), v1_1, v0_10);
                v0_11 = _mm256_fmadd_ps(_mm256_set1_ps(r3_0), v1_2, v0_11);
            }
            _mm256_storeu_ps(&t0[96 * i3], v0_0);
            _mm256_storeu_ps(&t0[96 * i3 + 8], v0_1);
            _mm256_storeu_ps(&t0[96 * i3 + 16], v0_2);
            _mm256_storeu_ps(&t0[96 * i3 + 24], v0_3);
            _mm256_storeu_ps(&t0[96 * i3 + 32], v0_4);
            _mm256_storeu_ps(&t0[96 * i3 + 40], v0_5);
            _mm256_storeu_ps(&t0[96 * i3 + 48], v0_6);
            _mm256_storeu_ps(&t0[96 * i3 + 56], v0_7);
            _mm256_storeu_ps(&t0[96 * i3 + 64], v0_8);
            _mm256_storeu_ps(&t0[96 * i3 + 72], v0_9);
            _mm256_storeu_ps(&t0[96 * i3 + 80], v0_10);
            _mm256_storeu_ps(&t0[96 * i3 + 88], v0_11);
        }
#if !NOCOPY
        float t2[6144] __attribute__((aligned(64)));
#endif
#if !FIRST_TILE
#if NOCOPY
        if (i0 == 0)
#endif
        for (int i5 = 0; i5 < 256; i5++) {
            for (int i6 = 0; i6 < 3; i6++) {
#if CACHED /* from the first strip's columns each time: a source in cache */
                _mm256_storeu_ps(&t2[8 * i6 + 24 * i5], _mm256_loadu_ps(&w[8 * i6 + 512 * i5 + 131072]));
#else
                _mm256_storeu_ps(&t2[8 * i6 + 24 * i5], _mm256_loadu_ps(&w[24 * i0 + 8 * i6 + 512 * i5 + 131072]));
#endif
            }
        }
#endif
        for (int i7 = 0; i7 < 32; i7++) {
#if PREFETCH /* 8 rows of the panel copied next per tile: this strip's second, or the next strip's first */
            for (int p = 0; p < 8; p++) {
                const char *a = (const char *)&w[24 * (i0 + 1) + 512 * (8 * i7 + p)];
                _mm_prefetch(a, _MM_HINT_T1);
                _mm_prefetch(a + 64, _MM_HINT_T1);
                _mm_prefetch(a + 95, _MM_HINT_T1);
            }
#endif
            __m256 v2_0, v2_1, v2_2, v2_3, v2_4, v2_5, v2_6, v2_7, v2_8, v2_9, v2_10, v2_11;
            v2_0 = _mm256_loadu_ps(&t0[96 * i7]);
            v2_1 = _mm256_loadu_ps(&t0[96 * i7 + 8]);
            v2_2 = _mm256_loadu_ps(&t0[96 * i7 + 16]);
            v2_3 = _mm256_loadu_ps(&t0[96 * i7 + 24]);
            v2_4 = _mm256_loadu_ps(&t0[96 * i7 + 32]);
            v2_5 = _mm256_loadu_ps(&t0[96 * i7 + 40]);
            v2_6 = _mm256_loadu_ps(&t0[96 * i7 + 48]);
            v2_7 = _mm256_loadu_ps(&t0[96 * i7 + 56]);
            v2_8 = _mm256_loadu_ps(&t0[96 * i7 + 64]);
            v2_9 = _mm256_loadu_ps(&t0[96 * i7 + 72]);
            v2_10 = _mm256_loadu_ps(&t0[96 * i7 + 80]);
            v2_11 = _mm256_loadu_ps(&t0[96 * i7 + 88]);
            for (int i8 = 0; i8 < 256; i8++) {
#if FIRST_TILE /* the first tile copies each row of the panel just before it uses it */
                if (i7 == 0)
                    for (int q = 0; q < 3; q++)
                        _mm256_storeu_ps(&t2[8 * q + 24 * i8], _mm256_loadu_ps(&w[24 * i0 + 8 * q + 512 * i8 + 131072]));
#endif
                __m256 v3_0, v3_1, v3_2;
                v3_0 = _mm256_loadu_ps(&t2[24 * i8]);
                v3_1 = _mm256_loadu_ps(&t2[24 * i8 + 8]);
                v3_2 = _mm256_loadu_ps(&t2[24 * i8 + 16]);
                float r4_0;
                r4_0 = x[i8 + 2048 * i7 + 256];
                v2_0 = _mm256_fmadd_ps(_mm256_set1_ps(r4_0), v3_0, v2_0);
                v2_1 = _mm256_fmadd_ps(_mm256_set1_ps(r4_0), v3_1, v2_1);
                v2_2 = _mm256_fmadd_ps(_mm256_set1_ps(r4_0), v3_2, v2_2);
                float r5_0;
                r5_0 = x[i8 + 2048 * i7 + 768];
                v2_3 = _mm256_fmadd_ps(_mm256_set1_ps(r5_0), v3_0, v2_3);
                v2_4 = _mm256_fmadd_ps(_mm256_set1_ps(r5_0), v3_1, v2_4);
                v2_5 = _mm256_fmadd_ps(_mm256_set1_ps(r5_0), v3_2, v2_5);
                float r6_0;
                r6_0 = x[i8 + 2048 * i7 + 1280];
                v2_6 = _mm256_fmadd_ps(_mm256_set1_ps(r6_0), v3_0, v2_6);
                v2_7 = _mm256_fmadd_ps(_mm256_set1_ps(r6_0), v3_1, v2_7);
                v2_8 = _mm256_fmadd_ps(_mm256_set1_ps(r6_0), v3_2, v2_8);
                float r7_0;
                r7_0 = x[i8 + 2048 * i7 + 1792];
                v2_9 = _mm256_fmadd_ps(_mm256_set1_ps(r7_0), v3_0, v2_9);
                v2_10 = _mm256_fmadd_ps(_mm256_set1_ps(r7_0), v3_1, v2_10);
                v2_11 = _mm256_fmadd_ps(_mm256_set1_ps(r7_0), v3_2, v2_11);
            }
            _mm256_storeu_ps(&t0[96 * i7], v2_0);
            _mm256_storeu_ps(&t0[96 * i7 + 8], v2_1);
            _mm256_storeu_ps(&t0[96 * i7 + 16], v2_2);
            _mm256_storeu_ps(&t0[96 * i7 + 24], v2_3);
            _mm256_storeu_ps(&t0[96 * i7 + 32], v2_4);
            _mm256_storeu_ps(&t0[96 * i7 + 40], v2_5);
            _mm256_storeu_ps(&t0[96 * i7 + 48], v2_6);
            _mm256_storeu_ps(&t0[96 * i7 + 56], v2_7);
            _mm256_storeu_ps(&t0[96 * i7 + 64], v2_8);
            _mm256_storeu_ps(&t0[96 * i7 + 72], v2_9);
            _mm256_storeu_ps(&t0[96 * i7 + 80], v2_10);
            _mm256_storeu_ps(&t0[96 * i7 + 88], v2_11);
        }
        for (int i9 = 0; i9 < 10; i9++) {
            for (int i10 = 0; i10 < 2; i10++) {
                __m256 v4_0, v4_1, v4_2, v4_3, v4_4, v4_5, v4_6, v4_7, v4_8, v4_9, v4_10, v4_11;
                __m256 v5_0;
                v5_0 = _mm256_loadu_ps(&b[24 * i0]);
                __m256 v6_0;
                v6_0 = _mm256_loadu_ps(&t0[288 * i9 + 144 * i10]);
                v4_0 = _mm256_add_ps(v6_0, v5_0);
                __m256 v7_0;
                v7_0 = _mm256_loadu_ps(&t0[288 * i9 + 144 * i10 + 24]);
                v4_2 = _mm256_add_ps(v7_0, v5_0);
                __m256 v8_0;
                v8_0 = _mm256_loadu_ps(&t0[288 * i9 + 144 * i10 + 48]);
                v4_4 = _mm256_add_ps(v8_0, v5_0);
                __m256 v9_0;
                v9_0 = _mm256_loadu_ps(&t0[288 * i9 + 144 * i10 + 72]);
                v4_6 = _mm256_add_ps(v9_0, v5_0);
                __m256 v10_0;
                v10_0 = _mm256_loadu_ps(&t0[288 * i9 + 144 * i10 + 96]);
                v4_8 = _mm256_add_ps(v10_0, v5_0);
                __m256 v11_0;
                v11_0 = _mm256_loadu_ps(&t0[288 * i9 + 144 * i10 + 120]);
                v4_10 = _mm256_add_ps(v11_0, v5_0);
                __m256 v12_0;
                v12_0 = _mm256_loadu_ps(&b[24 * i0 + 8]);
                __m256 v13_0;
                v13_0 = _mm256_loadu_ps(&t0[288 * i9 + 144 * i10 + 8]);
                v4_1 = _mm256_add_ps(v13_0, v12_0);
                __m256 v14_0;
                v14_0 = _mm256_loadu_ps(&t0[288 * i9 + 144 * i10 + 32]);
                v4_3 = _mm256_add_ps(v14_0, v12_0);
                __m256 v15_0;
                v15_0 = _mm256_loadu_ps(&t0[288 * i9 + 144 * i10 + 56]);
                v4_5 = _mm256_add_ps(v15_0, v12_0);
                __m256 v16_0;
                v16_0 = _mm256_loadu_ps(&t0[288 * i9 + 144 * i10 + 80]);
                v4_7 = _mm256_add_ps(v16_0, v12_0);
                __m256 v17_0;
                v17_0 = _mm256_loadu_ps(&t0[288 * i9 + 144 * i10 + 104]);
                v4_9 = _mm256_add_ps(v17_0, v12_0);
                __m256 v18_0;
                v18_0 = _mm256_loadu_ps(&t0[288 * i9 + 144 * i10 + 128]);
                v4_11 = _mm256_add_ps(v18_0, v12_0);
                _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 3072 * i10], _mm256_max_ps(v4_0, _mm256_setzero_ps()));
                _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 3072 * i10 + 8], _mm256_max_ps(v4_1, _mm256_setzero_ps()));
                _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 3072 * i10 + 512], _mm256_max_ps(v4_2, _mm256_setzero_ps()));
                _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 3072 * i10 + 520], _mm256_max_ps(v4_3, _mm256_setzero_ps()));
                _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 3072 * i10 + 1024], _mm256_max_ps(v4_4, _mm256_setzero_ps()));
                _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 3072 * i10 + 1032], _mm256_max_ps(v4_5, _mm256_setzero_ps()));
                _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 3072 * i10 + 1536], _mm256_max_ps(v4_6, _mm256_setzero_ps()));
                _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 3072 * i10 + 1544], _mm256_max_ps(v4_7, _mm256_setzero_ps()));
                _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 3072 * i10 + 2048], _mm256_max_ps(v4_8, _mm256_setzero_ps()));
                _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 3072 * i10 + 2056], _mm256_max_ps(v4_9, _mm256_setzero_ps()));
                _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 3072 * i10 + 2560], _mm256_max_ps(v4_10, _mm256_setzero_ps()));
                _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 3072 * i10 + 2568], _mm256_max_ps(v4_11, _mm256_setzero_ps()));
            }
            __m256 v19_0, v19_1, v19_2, v19_3, v19_4, v19_5, v19_6, v19_7, v19_8, v19_9, v19_10, v19_11;
            __m256 v20_0;
            v20_0 = _mm256_loadu_ps(&b[24 * i0 + 16]);
            __m256 v21_0;
            v21_0 = _mm256_loadu_ps(&t0[288 * i9 + 16]);
            v19_0 = _mm256_add_ps(v21_0, v20_0);
            __m256 v22_0;
            v22_0 = _mm256_loadu_ps(&t0[288 * i9 + 40]);
            v19_1 = _mm256_add_ps(v22_0, v20_0);
            __m256 v23_0;
            v23_0 = _mm256_loadu_ps(&t0[288 * i9 + 64]);
            v19_2 = _mm256_add_ps(v23_0, v20_0);
            __m256 v24_0;
            v24_0 = _mm256_loadu_ps(&t0[288 * i9 + 88]);
            v19_3 = _mm256_add_ps(v24_0, v20_0);
            __m256 v25_0;
            v25_0 = _mm256_loadu_ps(&t0[288 * i9 + 112]);
            v19_4 = _mm256_add_ps(v25_0, v20_0);
            __m256 v26_0;
            v26_0 = _mm256_loadu_ps(&t0[288 * i9 + 136]);
            v19_5 = _mm256_add_ps(v26_0, v20_0);
            __m256 v27_0;
            v27_0 = _mm256_loadu_ps(&t0[288 * i9 + 160]);
            v19_6 = _mm256_add_ps(v27_0, v20_0);
            __m256 v28_0;
            v28_0 = _mm256_loadu_ps(&t0[288 * i9 + 184]);
            v19_7 = _mm256_add_ps(v28_0, v20_0);
            __m256 v29_0;
            v29_0 = _mm256_loadu_ps(&t0[288 * i9 + 208]);
            v19_8 = _mm256_add_ps(v29_0, v20_0);
            __m256 v30_0;
            v30_0 = _mm256_loadu_ps(&t0[288 * i9 + 232]);
            v19_9 = _mm256_add_ps(v30_0, v20_0);
            __m256 v31_0;
            v31_0 = _mm256_loadu_ps(&t0[288 * i9 + 256]);
            v19_10 = _mm256_add_ps(v31_0, v20_0);
            __m256 v32_0;
            v32_0 = _mm256_loadu_ps(&t0[288 * i9 + 280]);
            v19_11 = _mm256_add_ps(v32_0, v20_0);
            _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 16], _mm256_max_ps(v19_0, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 528], _mm256_max_ps(v19_1, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 1040], _mm256_max_ps(v19_2, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 1552], _mm256_max_ps(v19_3, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 2064], _mm256_max_ps(v19_4, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 2576], _mm256_max_ps(v19_5, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 3088], _mm256_max_ps(v19_6, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 3600], _mm256_max_ps(v19_7, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 4112], _mm256_max_ps(v19_8, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 4624], _mm256_max_ps(v19_9, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 5136], _mm256_max_ps(v19_10, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 6144 * i9 + 5648], _mm256_max_ps(v19_11, _mm256_setzero_ps()));
        }
        for (int i11 = 0; i11 < 2; i11++) {
            __m256 v33_0, v33_1, v33_2, v33_3, v33_4, v33_5, v33_6, v33_7;
            __m256 v34_0;
            v34_0 = _mm256_loadu_ps(&b[24 * i0]);
            __m256 v35_0;
            v35_0 = _mm256_loadu_ps(&t0[96 * i11 + 2880]);
            v33_0 = _mm256_add_ps(v35_0, v34_0);
            __m256 v36_0;
            v36_0 = _mm256_loadu_ps(&t0[96 * i11 + 2904]);
            v33_2 = _mm256_add_ps(v36_0, v34_0);
            __m256 v37_0;
            v37_0 = _mm256_loadu_ps(&t0[96 * i11 + 2928]);
            v33_4 = _mm256_add_ps(v37_0, v34_0);
            __m256 v38_0;
            v38_0 = _mm256_loadu_ps(&t0[96 * i11 + 2952]);
            v33_6 = _mm256_add_ps(v38_0, v34_0);
            __m256 v39_0;
            v39_0 = _mm256_loadu_ps(&b[24 * i0 + 8]);
            __m256 v40_0;
            v40_0 = _mm256_loadu_ps(&t0[96 * i11 + 2888]);
            v33_1 = _mm256_add_ps(v40_0, v39_0);
            __m256 v41_0;
            v41_0 = _mm256_loadu_ps(&t0[96 * i11 + 2912]);
            v33_3 = _mm256_add_ps(v41_0, v39_0);
            __m256 v42_0;
            v42_0 = _mm256_loadu_ps(&t0[96 * i11 + 2936]);
            v33_5 = _mm256_add_ps(v42_0, v39_0);
            __m256 v43_0;
            v43_0 = _mm256_loadu_ps(&t0[96 * i11 + 2960]);
            v33_7 = _mm256_add_ps(v43_0, v39_0);
            _mm256_storeu_ps(&y[24 * i0 + 2048 * i11 + 61440], _mm256_max_ps(v33_0, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 2048 * i11 + 61448], _mm256_max_ps(v33_1, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 2048 * i11 + 61952], _mm256_max_ps(v33_2, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 2048 * i11 + 61960], _mm256_max_ps(v33_3, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 2048 * i11 + 62464], _mm256_max_ps(v33_4, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 2048 * i11 + 62472], _mm256_max_ps(v33_5, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 2048 * i11 + 62976], _mm256_max_ps(v33_6, _mm256_setzero_ps()));
            _mm256_storeu_ps(&y[24 * i0 + 2048 * i11 + 62984], _mm256_max_ps(v33_7, _mm256_setzero_ps()));
        }
        __m256 v44_0, v44_1, v44_2, v44_3, v44_4, v44_5, v44_6, v44_7;
        __m256 v45_0;
        v45_0 = _mm256_loadu_ps(&b[24 * i0 + 16]);
        __m256 v46_0;
        v46_0 = _mm256_loadu_ps(&t0[2896]);
        v44_0 = _mm256_add_ps(v46_0, v45_0);
        __m256 v47_0;
        v47_0 = _mm256_loadu_ps(&t0[2920]);
        v44_1 = _mm256_add_ps(v47_0, v45_0);
        __m256 v48_0;
        v48_0 = _mm256_loadu_ps(&t0[2944]);
        v44_2 = _mm256_add_ps(v48_0, v45_0);
        __m256 v49_0;
        v49_0 = _mm256_loadu_ps(&t0[2968]);
        v44_3 = _mm256_add_ps(v49_0, v45_0);
        __m256 v50_0;
        v50_0 = _mm256_loadu_ps(&t0[2992]);
        v44_4 = _mm256_add_ps(v50_0, v45_0);
        __m256 v51_0;
        v51_0 = _mm256_loadu_ps(&t0[3016]);
        v44_5 = _mm256_add_ps(v51_0, v45_0);
        __m256 v52_0;
        v52_0 = _mm256_loadu_ps(&t0[3040]);
        v44_6 = _mm256_add_ps(v52_0, v45_0);
        __m256 v53_0;
        v53_0 = _mm256_loadu_ps(&t0[3064]);
        v44_7 = _mm256_add_ps(v53_0, v45_0);
        _mm256_storeu_ps(&y[24 * i0 + 61456], _mm256_max_ps(v44_0, _mm256_setzero_ps()));
        _mm256_storeu_ps(&y[24 * i0 + 61968], _mm256_max_ps(v44_1, _mm256_setzero_ps()));
        _mm256_storeu_ps(&y[24 * i0 + 62480], _mm256_max_ps(v44_2, _mm256_setzero_ps()));
        _mm256_storeu_ps(&y[24 * i0 + 62992], _mm256_max_ps(v44_3, _mm256_setzero_ps()));
        _mm256_storeu_ps(&y[24 * i0 + 63504], _mm256_max_ps(v44_4, _mm256_setzero_ps()));
        _mm256_storeu_ps(&y[24 * i0 + 64016], _mm256_max_ps(v44_5, _mm256_setzero_ps()));
        _mm256_storeu_ps(&y[24 * i0 + 64528], _mm256_max_ps(v44_6, _mm256_setzero_ps()));
        _mm256_storeu_ps(&y[24 * i0 + 65040], _mm256_max_ps(v44_7, _mm256_setzero_ps()));
    }
    float t3[4096] __attribute__((aligned(64)));
    for (int i12 = 0; i12 < 512; i12++) {
        _mm256_storeu_ps(&t3[8 * i12], _mm256_loadu_ps(&w[512 * i12 + 504]));
    }
    for (int i13 = 0; i13 < 16; i13++) {
        __m256 v54_0, v54_1, v54_2, v54_3, v54_4, v54_5, v54_6, v54_7;
        v54_0 = _mm256_setzero_ps();
        v54_1 = _mm256_setzero_ps();
        v54_2 = _mm256_setzero_ps();
        v54_3 = _mm256_setzero_ps();
        v54_4 = _mm256_setzero_ps();
        v54_5 = _mm256_setzero_ps();
        v54_6 = _mm256_setzero_ps();
        v54_7 = _mm256_setzero_ps();
        for (int i14 = 0; i14 < 2; i14++) {
            for (int i15 = 0; i15 < 256; i15++) {
                __m256 v55_0;
                v55_0 = _mm256_loadu_ps(&t3[2048 * i14 + 8 * i15]);
                v54_0 = _mm256_fmadd_ps(_mm256_set1_ps(x[256 * i14 + i15 + 4096 * i13]), v55_0, v54_0);
                v54_1 = _mm256_fmadd_ps(_mm256_set1_ps(x[256 * i14 + i15 + 4096 * i13 + 512]), v55_0, v54_1);
                v54_2 = _mm256_fmadd_ps(_mm256_set1_ps(x[256 * i14 + i15 + 4096 * i13 + 1024]), v55_0, v54_2);
                v54_3 = _mm256_fmadd_ps(_mm256_set1_ps(x[256 * i14 + i15 + 4096 * i13 + 1536]), v55_0, v54_3);
                v54_4 = _mm256_fmadd_ps(_mm256_set1_ps(x[256 * i14 + i15 + 4096 * i13 + 2048]), v55_0, v54_4);
                v54_5 = _mm256_fmadd_ps(_mm256_set1_ps(x[256 * i14 + i15 + 4096 * i13 + 2560]), v55_0, v54_5);
                v54_6 = _mm256_fmadd_ps(_mm256_set1_ps(x[256 * i14 + i15 + 4096 * i13 + 3072]), v55_0, v54_6);
                v54_7 = _mm256_fmadd_ps(_mm256_set1_ps(x[256 * i14 + i15 + 4096 * i13 + 3584]), v55_0, v54_7);
            }
        }
        __m256 v56_0, v56_1, v56_2, v56_3;
        __m256 v57_0;
        v57_0 = _mm256_loadu_ps(&b[504]);
        v56_0 = _mm256_add_ps(v54_0, v57_0);
        v56_1 = _mm256_add_ps(v54_1, v57_0);
        v56_2 = _mm256_add_ps(v54_2, v57_0);
        v56_3 = _mm256_add_ps(v54_3, v57_0);
        _mm256_storeu_ps(&y[4096 * i13 + 504], _mm256_max_ps(v56_0, _mm256_setzero_ps()));
        _mm256_storeu_ps(&y[4096 * i13 + 1016], _mm256_max_ps(v56_1, _mm256_setzero_ps()));
        _mm256_storeu_ps(&y[4096 * i13 + 1528], _mm256_max_ps(v56_2, _mm256_setzero_ps()));
        _mm256_storeu_ps(&y[4096 * i13 + 2040], _mm256_max_ps(v56_3, _mm256_setzero_ps()));
        __m256 v58_0, v58_1, v58_2, v58_3;
        __m256 v59_0;
        v59_0 = _mm256_loadu_ps(&b[504]);
        v58_0 = _mm256_add_ps(v54_4, v59_0);
        v58_1 = _mm256_add_ps(v54_5, v59_0);
        v58_2 = _mm256_add_ps(v54_6, v59_0);
        v58_3 = _mm256_add_ps(v54_7, v59_0);
        _mm256_storeu_ps(&y[4096 * i13 + 2552], _mm256_max_ps(v58_0, _mm256_setzero_ps()));
        _mm256_storeu_ps(&y[4096 * i13 + 3064], _mm256_max_ps(v58_1, _mm256_setzero_ps()));
        _mm256_storeu_ps(&y[4096 * i13 + 3576], _mm256_max_ps(v58_2, _mm256_setzero_ps()));
        _mm256_storeu_ps(&y[4096 * i13 + 4088], _mm256_max_ps(v58_3, _mm256_setzero_ps()));
    }
}

