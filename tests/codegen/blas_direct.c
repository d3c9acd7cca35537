/* A CBLAS gemm called straight from a C loop: the yardstick for bench's peer timings.
 *
 *     blas_direct LIB SYMBOL INT_BITS N
 *
 * Loads LIB with dlopen (so the environment's library settings apply as for any program),
 * fills 64-byte-aligned N x N row-major matrices with values in [-1, 1), calls SYMBOL
 * (an sgemm with 32- or 64-bit ints) once to warm up, grows a batch of calls until it lasts
 * 50 ms, then prints the median seconds per call of 7 batches. Written independently of
 * morello's own harness, so the two can be compared.
 */
#define _POSIX_C_SOURCE 199309L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void (*sgemm32)(int, int, int, int32_t, int32_t, int32_t, float, const float *, int32_t,
                        const float *, int32_t, float, float *, int32_t);
typedef void (*sgemm64)(int, int, int, int64_t, int64_t, int64_t, float, const float *, int64_t,
                        const float *, int64_t, float, float *, int64_t);

static void *fn;
static int bits;
static long n;
static float *a, *b, *c;

static double batch(long iters) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < iters; i++) {
    if (bits == 64)
      ((sgemm64)fn)(101, 111, 111, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    else
      ((sgemm32)fn)(101, 111, 111, (int32_t)n, (int32_t)n, (int32_t)n, 1.0f, a, (int32_t)n, b,
                    (int32_t)n, 0.0f, c, (int32_t)n);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec)) / iters;
}

static int cmp(const void *x, const void *y) {
  double d = *(const double *)x - *(const double *)y;
  return (d > 0) - (d < 0);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: blas_direct LIB SYMBOL INT_BITS N\n");
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  fn = dlsym(lib, argv[2]);
  if (!fn) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  bits = atoi(argv[3]);
  n = atol(argv[4]);
  size_t bytes = ((size_t)(n * n * sizeof(float)) + 63) / 64 * 64;
  a = aligned_alloc(64, bytes);
  b = aligned_alloc(64, bytes);
  c = aligned_alloc(64, bytes);
  srand(1);
  for (long i = 0; i < n * n; i++) {
    a[i] = 2.0f * (float)rand() / (float)RAND_MAX - 1.0f;
    b[i] = 2.0f * (float)rand() / (float)RAND_MAX - 1.0f;
  }
  batch(1);
  long iters = 1;
  while (batch(iters) * iters < 0.05) iters *= 2;
  double samples[7];
  for (int r = 0; r < 7; r++) samples[r] = batch(iters);
  qsort(samples, 7, sizeof(double), cmp);
  printf("%.9g\n", samples[3]);
  return 0;
}
