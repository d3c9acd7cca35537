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
 *       -DNARGS=3 -DS0=<elements of arg 0> -DS1=... -DS2=... -DS3=1 -DFLOPS=<2mkn> \
 *       -DT0=float -DK0=0 ... -DT3=float -DK3=0 benchmarks/ab_programs.c old.c new.c -lm
 *
 * NARGS is 2, 3 or 4 (one to three inputs, then the output); S0..S3 are each argument's
 * number of elements (1 for those past NARGS, which are unused); T0..T3 their C element
 * types and K0..K3 how their values are written and read: 0 a float type, 1 bf16 (the upper
 * 16 bits of an f32, held in a uint16_t), 2 an integer type.
 *
 * Arguments: up to NARGS byte offsets within a 4 KiB page, one for each argument's buffer
 * (default 0: page-aligned). Where buffers lie relative to each other within a page can
 * change a program's speed (4K aliasing, cache sets), so ab.py times several placements.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if NARGS == 2
void OLD(const T0 *, T1 *);
void NEW(const T0 *, T1 *);
#define CALL(f, out) f(arg[0], out)
#define TOUT T1
#define KOUT K1
#elif NARGS == 3
void OLD(const T0 *, const T1 *, T2 *);
void NEW(const T0 *, const T1 *, T2 *);
#define CALL(f, out) f(arg[0], arg[1], out)
#define TOUT T2
#define KOUT K2
#else
void OLD(const T0 *, const T1 *, const T2 *, T3 *);
void NEW(const T0 *, const T1 *, const T2 *, T3 *);
#define CALL(f, out) f(arg[0], arg[1], arg[2], out)
#define TOUT T3
#define KOUT K3
#endif

/* Element i of an argument: small values, a different pattern for each argument j. */
#define FILL(T, K, p, i, j)                                                                    \
    do {                                                                                       \
        float v_ = (float)(((i) * 7 + (j)) % 13) * 0.01f - 0.05f;                              \
        if ((K) == 1) {                                                                        \
            uint32_t bits_;                                                                    \
            memcpy(&bits_, &v_, 4);                                                            \
            uint16_t top_ = (uint16_t)(bits_ >> 16);                                           \
            memcpy((char *)(p) + 2 * (i), &top_, 2);                                           \
        } else if ((K) == 2) {                                                                 \
            ((T *)(p))[i] = (T)(((i) * 7 + (j)) % 13);                                         \
        } else {                                                                               \
            ((T *)(p))[i] = (T)v_;                                                             \
        }                                                                                      \
    } while (0)

static double out_value(const TOUT *p, long i)
{
    if (KOUT == 1) {
        uint16_t top;
        memcpy(&top, (const char *)p + 2 * i, 2);
        uint32_t bits = (uint32_t)top << 16;
        float v;
        memcpy(&v, &bits, 4);
        return v;
    }
    return (double)p[i];
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

/* A buffer of `bytes` starting `offset` bytes into a page. */
static void *placed(size_t bytes, long offset)
{
    char *page = aligned_alloc(4096, (bytes + offset + 4096 + 4095) / 4096 * 4096);
    return page + offset;
}

int main(int argc, char **argv)
{
    long sizes[4] = {S0, S1, S2, S3};
    long offset[4] = {0, 0, 0, 0};
    for (int j = 0; j < 4 && j + 1 < argc; j++) offset[j] = atol(argv[j + 1]) % 4096;
    void *arg[4] = {
        placed(sizeof(T0) * S0, offset[0]),
        placed(sizeof(T1) * S1, offset[1]),
        placed(sizeof(T2) * S2, offset[2]),
        placed(sizeof(T3) * S3, offset[3]),
    };
    for (long i = 0; i < sizes[0]; i++) FILL(T0, K0, arg[0], i, 0);
    for (long i = 0; i < sizes[1]; i++) FILL(T1, K1, arg[1], i, 1);
    for (long i = 0; i < sizes[2]; i++) FILL(T2, K2, arg[2], i, 2);
    for (long i = 0; i < sizes[3]; i++) FILL(T3, K3, arg[3], i, 3);
    long outs = sizes[NARGS - 1];
    TOUT *got_old = placed(sizeof(TOUT) * outs, offset[NARGS - 1]);
    TOUT *got_new = placed(sizeof(TOUT) * outs, offset[NARGS - 1]);
    CALL(OLD, got_old);
    CALL(NEW, got_new);
    double diff = 0;
    for (long i = 0; i < outs; i++)
        diff = fmax(diff, fabs(out_value(got_old, i) - out_value(got_new, i)));
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
