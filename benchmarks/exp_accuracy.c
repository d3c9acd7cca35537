/* Exhaustive accuracy sweep of an 8-lane f32 exp kernel against double-precision exp.

   Not built on its own: benchmarks/exp_accuracy.py renders the kernel's C template from its
   rule file into vexp_kernel.h, which must define

       static inline __m256 vexp_kernel(__m256 x);

   and builds this file with  gcc -O2 -mavx2 -mfma [-fopenmp] -I<folder of the header> -lm.

   Every one of the 2^32 f32 bit patterns (or every STRIDE-th, from argv[1]) is fed through the
   kernel. Each result is put in one class by the true value e = exp((double)x):
     NaN input            the result must be NaN;
     e rounds to +inf     the result must be +inf (the float overflows);
     e >= FLT_MIN         relative error |y - e| / e and ulp error |y - e| / ulp(e) measured,
                          where ulp(e) is the spacing of floats at e (2^(k-23) for e in
                          [2^k, 2^(k+1))); a +inf result here is counted as a false overflow;
     e < FLT_MIN          (true result subnormal or zero) the result must be in [0, 2 FLT_MIN];
                          its distance to the correctly rounded float is measured in units of
                          the smallest subnormal 2^-149.
   Also counted: results equal to the correctly rounded float (float)e. */

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vexp_kernel.h"

typedef struct {
    uint64_t tested;
    uint64_t nan_in, nan_bad;           /* NaN inputs; of them, results that are not NaN */
    uint64_t ovf, ovf_bad, ovf_false;   /* +inf expected; not given; given where not expected */
    uint64_t normal;                    /* true result a normal float */
    uint64_t sub, sub_bad;              /* true result below FLT_MIN; result outside [0, 2 FLT_MIN] */
    uint64_t sub_nonzero;               /* ... where the kernel returned a nonzero value */
    uint64_t exact;                     /* result == correctly rounded (float)e */
    double max_rel, max_ulp, max_sub_units;
    float arg_rel, arg_ulp, arg_sub;
    double ulp_hist[4];                 /* normal results with ulp error <=0.5, <=1, <=2, >2 */
} stats;

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void check_lane(stats *s, float x, float y) {
    s->tested++;
    if (isnan(x)) {
        s->nan_in++;
        if (!isnan(y)) s->nan_bad++;
        return;
    }
    double e = exp((double)x);
    float ef = (float)e;
    if (!isnan(y) && y == ef) s->exact++;
    if (isinf(ef)) {
        s->ovf++;
        if (!(isinf(y) && y > 0)) s->ovf_bad++;
        return;
    }
    if (isinf(y)) s->ovf_false++;
    if (e >= FLT_MIN) {
        s->normal++;
        double err = isnan(y) ? INFINITY : fabs((double)y - e);
        double rel = err / e;
        int k;
        frexp(e, &k); /* e = m 2^k, m in [0.5, 1): float spacing 2^(k-24) */
        double ulp = err / ldexp(1.0, k - 24);
        if (rel > s->max_rel) { s->max_rel = rel; s->arg_rel = x; }
        if (ulp > s->max_ulp) { s->max_ulp = ulp; s->arg_ulp = x; }
        s->ulp_hist[ulp <= 0.5 ? 0 : ulp <= 1.0 ? 1 : ulp <= 2.0 ? 2 : 3] += 1;
    } else {
        s->sub++;
        if (!(y >= 0.0f && y <= 2.0f * FLT_MIN)) s->sub_bad++;
        if (y != 0.0f) s->sub_nonzero++;
        double units = isnan(y) ? INFINITY : fabs((double)y - (double)ef) / ldexp(1.0, -149);
        if (units > s->max_sub_units) { s->max_sub_units = units; s->arg_sub = x; }
    }
}

static void merge(stats *a, const stats *b) {
    a->tested += b->tested;
    a->nan_in += b->nan_in;
    a->nan_bad += b->nan_bad;
    a->ovf += b->ovf;
    a->ovf_bad += b->ovf_bad;
    a->ovf_false += b->ovf_false;
    a->normal += b->normal;
    a->sub += b->sub;
    a->sub_bad += b->sub_bad;
    a->sub_nonzero += b->sub_nonzero;
    a->exact += b->exact;
    for (int i = 0; i < 4; i++) a->ulp_hist[i] += b->ulp_hist[i];
    if (b->max_rel > a->max_rel) { a->max_rel = b->max_rel; a->arg_rel = b->arg_rel; }
    if (b->max_ulp > a->max_ulp) { a->max_ulp = b->max_ulp; a->arg_ulp = b->arg_ulp; }
    if (b->max_sub_units > a->max_sub_units) {
        a->max_sub_units = b->max_sub_units;
        a->arg_sub = b->arg_sub;
    }
}

/* Patterns start, start + stride, ... (8 of them) through the kernel. */
static void run_block(stats *s, uint64_t start, uint64_t stride) {
    float in[8], out[8];
    for (int i = 0; i < 8; i++) in[i] = from_bits((uint32_t)(start + (uint64_t)i * stride));
    _mm256_storeu_ps(out, vexp_kernel(_mm256_loadu_ps(in)));
    for (int i = 0; i < 8; i++) check_lane(s, in[i], out[i]);
}

int main(int argc, char **argv) {
    uint64_t stride = argc > 1 ? strtoull(argv[1], NULL, 10) : 1;
    if (stride == 0 || (stride & (stride - 1)) != 0 || stride > (1u << 16)) {
        fprintf(stderr, "stride must be a power of two <= 65536\n");
        return 2;
    }
    const uint64_t blocks = (UINT64_C(1) << 32) / (8 * stride);
    stats total;
    memset(&total, 0, sizeof total);
#pragma omp parallel
    {
        stats local;
        memset(&local, 0, sizeof local);
#pragma omp for schedule(dynamic, 65536)
        for (int64_t b = 0; b < (int64_t)blocks; b++) run_block(&local, (uint64_t)b * 8 * stride, stride);
#pragma omp critical
        merge(&total, &local);
    }
    printf("patterns tested:          %llu (every %llu-th of 2^32)\n",
           (unsigned long long)total.tested, (unsigned long long)stride);
    printf("normal results:           %llu\n", (unsigned long long)total.normal);
    printf("  max relative error:     %.4g at x = %.9g (%a)\n", total.max_rel,
           (double)total.arg_rel, (double)total.arg_rel);
    printf("  max ulp error:          %.4f at x = %.9g (%a)\n", total.max_ulp,
           (double)total.arg_ulp, (double)total.arg_ulp);
    printf("  ulp error <=0.5 / <=1 / <=2 / >2: %.0f / %.0f / %.0f / %.0f\n",
           total.ulp_hist[0], total.ulp_hist[1], total.ulp_hist[2], total.ulp_hist[3]);
    printf("correctly rounded:        %llu of %llu non-NaN (%.3f%%)\n",
           (unsigned long long)total.exact, (unsigned long long)(total.tested - total.nan_in),
           100.0 * (double)total.exact / (double)(total.tested - total.nan_in));
    printf("overflow (+inf expected): %llu, not +inf: %llu; +inf where finite expected: %llu\n",
           (unsigned long long)total.ovf, (unsigned long long)total.ovf_bad,
           (unsigned long long)total.ovf_false);
    printf("true result < FLT_MIN:    %llu, outside [0, 2 FLT_MIN]: %llu, nonzero: %llu\n",
           (unsigned long long)total.sub, (unsigned long long)total.sub_bad,
           (unsigned long long)total.sub_nonzero);
    printf("  max distance from correctly rounded, in units of 2^-149: %.4g at x = %.9g\n",
           total.max_sub_units, (double)total.arg_sub);
    printf("NaN inputs:               %llu, non-NaN results: %llu\n",
           (unsigned long long)total.nan_in, (unsigned long long)total.nan_bad);
    int bad = total.nan_bad || total.ovf_bad || total.ovf_false || total.sub_bad;
    return bad ? 1 : 0;
}
