/* Known allocation sites for the profiler test (capi/tests/profile.rs): site_a holds 70% of the
 * live bytes, site_b 30%, each in many small blocks and a few large ones (spans, never touched);
 * site_churn allocates and frees. Nothing is freed before exit, when the profile is written.
 * Prints the truth: "site_a <bytes> site_b <bytes>". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB ((size_t)1 << 20)
static void *keep[1 << 17];
static size_t kept;

static size_t small_blocks(size_t bytes) {
    size_t total = 0;
    for (size_t i = 0; total < bytes; i++) {
        size_t n = 16 + (i * 7919) % 4080;
        void *p = malloc(n);
        if (!p) abort();
        memset(p, 1, n);
        keep[kept++] = p;
        total += n;
    }
    return total;
}

static size_t large_blocks(size_t count, size_t each) {
    for (size_t i = 0; i < count; i++) {
        void *p = malloc(each);
        if (!p) abort();
        keep[kept++] = p;
    }
    return count * each;
}

__attribute__((noinline)) size_t site_a_small(void) { return small_blocks(56 * MIB); }
__attribute__((noinline)) size_t site_a_large(void) { return large_blocks(4, 200 * MIB); }
__attribute__((noinline)) size_t site_b_small(void) { return small_blocks(24 * MIB); }
__attribute__((noinline)) size_t site_b_large(void) { return large_blocks(3, 115 * MIB); }

__attribute__((noinline)) void site_churn(void) {
    for (int round = 0; round < 64; round++) {
        size_t from = kept;
        small_blocks(MIB);
        while (kept > from) free(keep[--kept]);
    }
}

int main(void) {
    size_t a = site_a_small();
    site_churn();
    a += site_a_large();
    size_t b = site_b_small();
    b += site_b_large();
    printf("site_a %zu site_b %zu\n", a, b);
    return 0;
}
