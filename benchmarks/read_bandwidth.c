/* Single-core memory read bandwidth, the yardstick for memory-bound kernels.
 *
 *     gcc -O3 -mavx2 -mfma -o read_bandwidth read_bandwidth.c
 *     ./read_bandwidth SIZE_MIB REPEATS
 *
 * Allocates SIZE_MIB MiB (64-byte aligned), writes every byte once so every page is faulted
 * in and backed by its own frame (not the shared zero page), makes one warm-up pass, then
 * times REPEATS read passes of each variant, in turn so all see the same noise:
 *
 *   sequential   one stream from the start of the buffer to its end;
 *   S streams    the buffer read as S = 2, 4, 8 equal parts at once, a line from each in turn
 *                (a core's prefetchers follow several streams, and together they move more
 *                data than one: the machine's read bandwidth is the best of the variants).
 *
 * Each pass adds every loaded 32-byte vector into one of 8 independent accumulators, so the
 * loads cannot be dropped and the adds are never the bottleneck. Prints one line of JSON:
 *
 *   {"bytes": N, "seconds": [...], "seconds_streams": {"2": [...], "4": [...], "8": [...]},
 *    "checksum": N}
 *
 * "seconds" holds the sequential passes. The checksum is printed so the compiler must keep
 * every pass. Errors go to stderr with exit status 2.
 */
#include <errno.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VEC_BYTES 32             /* one __m256i */
#define STEP_BYTES (8 * VEC_BYTES) /* bytes read per loop iteration: 8 vectors */

static const int MULTI[] = {2, 4, 8}; /* stream counts of the multi-stream variants */
#define N_MULTI 3

/* Seconds on the monotonic clock. */
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Fold 8 accumulators into one 64-bit number. */
static uint64_t fold(const __m256i acc[8]) {
  __m256i sum = acc[0];
  for (int i = 1; i < 8; i++) sum = _mm256_add_epi64(sum, acc[i]);
  uint64_t lanes[4];
  _mm256_storeu_si256((__m256i *)lanes, sum);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

/* One pass from buf[0] to buf[bytes - 1]; bytes is a multiple of STEP_BYTES. */
static uint64_t read_sequential(const unsigned char *buf, size_t bytes) {
  __m256i acc[8];
  for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_si256();
  for (size_t off = 0; off < bytes; off += STEP_BYTES) {
    const __m256i *p = (const __m256i *)(buf + off);
    acc[0] = _mm256_add_epi64(acc[0], _mm256_load_si256(p + 0));
    acc[1] = _mm256_add_epi64(acc[1], _mm256_load_si256(p + 1));
    acc[2] = _mm256_add_epi64(acc[2], _mm256_load_si256(p + 2));
    acc[3] = _mm256_add_epi64(acc[3], _mm256_load_si256(p + 3));
    acc[4] = _mm256_add_epi64(acc[4], _mm256_load_si256(p + 4));
    acc[5] = _mm256_add_epi64(acc[5], _mm256_load_si256(p + 5));
    acc[6] = _mm256_add_epi64(acc[6], _mm256_load_si256(p + 6));
    acc[7] = _mm256_add_epi64(acc[7], _mm256_load_si256(p + 7));
  }
  return fold(acc);
}

/* One pass reading the buffer as `streams` equal parts at once: each iteration reads one
 * 64-byte line from every part. bytes / streams is a multiple of 64. */
static uint64_t read_streams(const unsigned char *buf, size_t bytes, int streams) {
  size_t part = bytes / (size_t)streams;
  __m256i acc[8];
  for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_si256();
  for (size_t off = 0; off < part; off += 64) {
    for (int s = 0; s < streams; s++) {
      const __m256i *p = (const __m256i *)(buf + (size_t)s * part + off);
      acc[(2 * s) % 8] = _mm256_add_epi64(acc[(2 * s) % 8], _mm256_load_si256(p));
      acc[(2 * s + 1) % 8] = _mm256_add_epi64(acc[(2 * s + 1) % 8], _mm256_load_si256(p + 1));
    }
  }
  return fold(acc);
}

/* Parse a positive integer argument no larger than max, or exit with a message. */
static long parse_positive(const char *text, const char *what, long max) {
  char *end;
  errno = 0;
  long value = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value <= 0 || value > max) {
    fprintf(stderr, "read_bandwidth: %s must be an integer in 1..%ld, got '%s'\n", what, max,
            text);
    exit(2);
  }
  return value;
}

/* Print the per-pass times as a JSON array. */
static void print_seconds(const double *seconds, long repeats) {
  putchar('[');
  for (long i = 0; i < repeats; i++) printf("%s%.9f", i ? ", " : "", seconds[i]);
  putchar(']');
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s SIZE_MIB REPEATS\n", argv[0]);
    return 2;
  }
  long size_mib = parse_positive(argv[1], "SIZE_MIB", 1L << 20);
  long repeats = parse_positive(argv[2], "REPEATS", 1000000);
  size_t bytes = (size_t)size_mib << 20; /* a multiple of 64 and of STEP_BYTES */

  unsigned char *buf = aligned_alloc(64, bytes);
  double *seq = malloc((size_t)repeats * sizeof *seq);
  double *multi = malloc((size_t)repeats * N_MULTI * sizeof *multi);
  if (buf == NULL || seq == NULL || multi == NULL) {
    fprintf(stderr, "read_bandwidth: cannot allocate %ld MiB\n", size_mib);
    return 2;
  }
  memset(buf, 0x5a, bytes); /* fault in every page with its own, non-zero frame */

  uint64_t checksum = read_sequential(buf, bytes); /* warm-up pass */
  for (long i = 0; i < repeats; i++) {
    double t0 = now();
    checksum += read_sequential(buf, bytes);
    seq[i] = now() - t0;
    for (int v = 0; v < N_MULTI; v++) {
      t0 = now();
      checksum += read_streams(buf, bytes, MULTI[v]);
      multi[v * repeats + i] = now() - t0;
    }
  }

  printf("{\"bytes\": %zu, \"seconds\": ", bytes);
  print_seconds(seq, repeats);
  printf(", \"seconds_streams\": {");
  for (int v = 0; v < N_MULTI; v++) {
    printf("%s\"%d\": ", v ? ", " : "", MULTI[v]);
    print_seconds(multi + v * repeats, repeats);
  }
  printf("}, \"checksum\": %llu}\n", (unsigned long long)checksum);

  free(multi);
  free(seq);
  free(buf);
  return 0;
}
