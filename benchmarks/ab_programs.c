/* Two generated programs of one spec, timed against each other in one process.
 *
 * Calls alternate (old, new, old, new, ...) in rounds; each round's ratio is the median old
 * time over the median new time; the median and range of 7 rounds is printed (above 1: the
 * new program is faster). The outputs are compared first (largest difference printed).
 * Inputs are the same buffers for both. `benchmarks/ab.py SPEC OLD.c NEW.c` builds and runs it
 * for a spec's function (it renames the two definitions and sets the macros below from the
 * spec); by hand:
 *
 *   sed -i 's/void S(/void old_S(/' old.c; sed -i 's/void S(/void new_S(/' new.c
 *   gcc -O3 -mavx2 -mfma -mtune=znver1 -DOLD=old_S -DNEW=new_S -DNAME='"S"' \
 *       -DNARGS=3 -DS0=<floats of arg 0> -DS1=... -DS2=... -DS3=1 -DFLOPS=<2mkn> \
 *       benchmarks/ab_programs.c old.c new.c -lm && ./a.out
 *
 * NARGS is 3 (two inputs and the output) or 4 (three inputs and the output); S0..S3 are
 * each argument's number of floats (S3 unused with 3).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if NARGS == 3
void OLD(const float *, const float *, float *);
void NEW(const float *, const float *, float *);
#define CALL(f, out) f(arg[0], arg[1], out)
#else
void OLD(const float *, const float *, const float *, float *);
void NEW(const float *, const float *, const float *, float *);
#define CALL(f, out) f(arg[0], arg[1], arg[2], out)
#endif

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
    long sizes[4] = {S0, S1, S2, S3};
    float *arg[4];
    for (int j = 0; j < 4; j++) {
        arg[j] = aligned_alloc(64, 4 * sizes[j] + 64);
        for (long i = 0; i < sizes[j]; i++) arg[j][i] = (float)((i * 7 + j) % 13) * 0.01f - 0.05f;
    }
    long outs = sizes[NARGS - 1];
    float *got_old = aligned_alloc(64, 4 * outs + 64), *got_new = aligned_alloc(64, 4 * outs + 64);
    CALL(OLD, got_old);
    CALL(NEW, got_new);
    double diff = 0;
    for (long i = 0; i < outs; i++) diff = fmax(diff, fabs(got_old[i] - got_new[i]));
    double flops = FLOPS;
    int calls = (int)(2e9 / flops);
    calls = calls < 5 ? 5 : calls > 2001 ? 2001 : calls;
    calls |= 1;
    double ratio[7], *t_old = malloc(8 * calls), *t_new = malloc(8 * calls);
    for (int round = 0; round < 7; round++) {
        for (int i = 0; i < calls; i++) {
            double start = now();
            CALL(OLD, got_old);
            t_old[i] = now() - start;
            start = now();
            CALL(NEW, got_new);
            t_new[i] = now() - start;
        }
        qsort(t_old, calls, 8, by_value);
        qsort(t_new, calls, 8, by_value);
        ratio[round] = t_old[calls / 2] / t_new[calls / 2];
    }
    qsort(ratio, 7, 8, by_value);
    printf("%s: largest difference %g; last round old %.1f us, new %.1f us; "
           "new/old speed median %.3f (range %.3f-%.3f)\n",
           NAME, diff, t_old[calls / 2] * 1e6, t_new[calls / 2] * 1e6, ratio[3], ratio[0],
           ratio[6]);
    return 0;
}
