/* A C caller of the synthesized bf16 vector-matrix multiply, as an inference engine would be.
 *
 * It includes only the generated header, links the generated C, and checks:
 *   - the answer against a double-precision reference computed here from the same bf16 values,
 *     within the f32-accumulation bound (k + 2) * 2^-24 * sum |x| |w| (bf16 -> f32 is exact,
 *     and a product of two bf16 values is exact in f32, so only the summation rounds);
 *   - that two threads calling it at once on different outputs both get that answer.
 * The weights are laid out as the header documents (packed_cols(16)): element w[k, n] is at
 * w[(n / 16) * (K * 16) + k * 16 + n % 16].
 * Exit status 0 when everything matches; a message and status 1 otherwise.
 */
#include "gemma_matvec.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K = 2048, N = 16384, PANEL = 16 };

/* float -> bf16 bits, round to nearest, ties to even (inputs here are finite). */
static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static double from_bf16(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* A small deterministic generator: values in [-1, 1). */
static float next_value(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

struct call {
    const uint16_t *x, *w;
    float *y;
};

static void *run_call(void *arg)
{
    struct call *c = arg;
    gemma_matvec(c->x, c->w, c->y);
    return NULL;
}

static int check(const char *what, const float *y, const double *want, const double *bound)
{
    for (int n = 0; n < N; n++) {
        if (!(fabs((double)y[n] - want[n]) <= bound[n])) {
            fprintf(stderr, "%s: y[%d] = %.9g, expected %.9g (allowed error %.3g)\n", what, n,
                    (double)y[n], want[n], bound[n]);
            return 1;
        }
    }
    return 0;
}

int main(void)
{
    uint16_t *x = malloc(sizeof *x * K);
    uint16_t *w = malloc(sizeof *w * (size_t)K * N);
    float *y1 = malloc(sizeof *y1 * N), *y2 = malloc(sizeof *y2 * N);
    double *want = calloc(N, sizeof *want), *bound = calloc(N, sizeof *bound);
    if (!x || !w || !y1 || !y2 || !want || !bound) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    uint64_t state = 42;
    for (int k = 0; k < K; k++)
        x[k] = to_bf16(next_value(&state));
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++)
            w[(size_t)(n / PANEL) * K * PANEL + (size_t)k * PANEL + n % PANEL] =
                to_bf16(next_value(&state));

    for (int k = 0; k < K; k++) {
        double xk = from_bf16(x[k]);
        for (int n = 0; n < N; n++) {
            double wkn = from_bf16(w[(size_t)(n / PANEL) * K * PANEL + (size_t)k * PANEL + n % PANEL]);
            want[n] += xk * wkn;
            bound[n] += fabs(xk * wkn);
        }
    }
    for (int n = 0; n < N; n++)
        bound[n] = (K + 2) * ldexp(bound[n], -24) + 1e-30;

    for (int n = 0; n < N; n++)
        y1[n] = y2[n] = NAN; /* the function must overwrite every output */
    gemma_matvec(x, w, y1);
    if (check("single call", y1, want, bound))
        return 1;

    struct call calls[2] = {{x, w, y1}, {x, w, y2}};
    for (int n = 0; n < N; n++)
        y1[n] = y2[n] = NAN;
    pthread_t threads[2];
    for (int t = 0; t < 2; t++)
        if (pthread_create(&threads[t], NULL, run_call, &calls[t]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    for (int t = 0; t < 2; t++)
        pthread_join(threads[t], NULL);
    if (check("thread 1", y1, want, bound) || check("thread 2", y2, want, bound))
        return 1;

    printf("gemma_matvec: %d outputs match the reference, alone and from 2 threads\n", N);
    free(x), free(w), free(y1), free(y2), free(want), free(bound);
    return 0;
}
