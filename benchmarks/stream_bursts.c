/* How fast one core reads R rows of a large matrix at once, by how many lines it takes from
 * one row before it moves to the next (the burst).
 *
 * The matrix is ROWS x COLS floats, row-major (a matvec's weights: 2048 x 16384, 128 MiB by
 * default). It is read in steps of R rows; a step walks its rows' columns in tiles of B lines,
 * and a tile reads B lines of its first row, then B lines of the next, and so on: the order in
 * which a matvec with a register tile B lines wide reads its weights. Every line is read once
 * per pass. For each burst, the fastest of 7 passes is printed, in GB/s.
 *
 *   gcc -O3 -mavx2 -mfma benchmarks/stream_bursts.c -o bursts && ./bursts 8
 *   ./bursts R [ROWS COLS]
 *
 * BENCHMARKS.md ("Bursts", zen4's section) has what a Zen 4 showed: 8 rows read in bursts of
 * 4-16 lines ran 15-20% faster than in bursts of 24 or more.
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* One pass: the sum of every element the walk reads (tiles that do not fill a row's end are
 * skipped, so the sum tells how many elements were read). */
static double pass(const float *w, long rows, long cols, int r, int burst)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    long width = 16L * burst; /* floats in `burst` lines of 64 bytes */
    for (long k = 0; k + r <= rows; k += r)
        for (long c = 0; c + width <= cols; c += width)
            for (int i = 0; i < r; i++) {
                const float *p = w + (k + i) * cols + c;
                for (long j = 0; j < width; j += 16) {
                    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + j));
                    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + j + 8));
                }
            }
    float lanes[8];
    _mm256_storeu_ps(lanes, _mm256_add_ps(a0, a1));
    double sum = 0;
    for (int i = 0; i < 8; i++) sum += lanes[i];
    return sum;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 4) {
        fprintf(stderr, "usage: %s R [ROWS COLS]\n", argv[0]);
        return 2;
    }
    int r = atoi(argv[1]);
    long rows = argc == 4 ? atol(argv[2]) : 2048, cols = argc == 4 ? atol(argv[3]) : 16384;
    if (r < 1 || rows < r || cols < 16 || cols % 16) {
        fprintf(stderr, "R must be 1 to ROWS, COLS a multiple of 16\n");
        return 2;
    }
    if (rows * cols / 16 >= 1L << 24) {
        fprintf(stderr, "ROWS x COLS too large for an exact count (at most 2^28 elements)\n");
        return 2;
    }
    float *w = aligned_alloc(4096, (rows * cols * 4 + 4095) / 4096 * 4096);
    for (long i = 0; i < rows * cols; i++) w[i] = 1.0f; /* each lane's sum stays exact */
    static const int bursts[] = {1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 48, 64};
    enum { N = sizeof bursts / sizeof bursts[0] };
    double best[N];
    for (int b = 0; b < N; b++) best[b] = 1e30;
    for (int round = 0; round < 7; round++)
        for (int b = 0; b < N; b++) {
            long width = 16L * bursts[b];
            double expected = (double)(rows / r * r) * (cols / width * width);
            double start = now();
            double sum = pass(w, rows, cols, r, bursts[b]);
            double t = now() - start;
            if (sum != expected) {
                fprintf(stderr, "burst %d: read %.0f elements, expected %.0f\n", bursts[b], sum,
                        expected);
                return 1;
            }
            double ns_per_byte = t * 1e9 / (expected * 4);
            if (ns_per_byte < best[b]) best[b] = ns_per_byte;
        }
    for (int b = 0; b < N; b++)
        printf("rows at once %d, burst %2d lines: %.1f GB/s\n", r, bursts[b], 1 / best[b]);
    return 0;
}
