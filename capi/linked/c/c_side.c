/* The C library of the linked test (capi/linked): allocates with the process's malloc, whichever that is;
 * here it is poolalloc's, linked into the Rust test executable by poolalloc_c::link(). */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BLOCKS 200000
static void *blocks[MAX_BLOCKS]; /* static, so that only the blocks themselves are malloc'd */
static size_t count;

/* Sizes: 8 B to 2 KiB mostly, every 1000th block 256 KiB (a large block). */
static size_t size_at(size_t i) {
    uint64_t x = (uint64_t)i * 6364136223846793005ull + 1442695040888963407ull;
    if (i % 1000 == 999) return 256 << 10;
    return 8 + (size_t)((x >> 33) % 2041);
}

/* Allocates n blocks of mixed sizes, writes every byte of each, and reports their requested and
 * usable bytes, and the usable bytes of those above 64 KiB (and their count). 0 when malloc failed. */
int c_alloc_many(size_t n, size_t *requested, size_t *usable_small, size_t *usable_large, size_t *large) {
    if (count + n > MAX_BLOCKS) return 0;
    *requested = *usable_small = *usable_large = *large = 0;
    for (size_t i = 0; i < n; i++) {
        size_t size = size_at(i);
        void *p = malloc(size);
        if (!p) return 0;
        memset(p, (int)(i & 0xff), size);
        blocks[count++] = p;
        size_t u = malloc_usable_size(p);
        if (u < size) return 0;
        *requested += size;
        if (u > 65536) {
            *usable_large += u;
            *large += 1;
        } else {
            *usable_small += u;
        }
    }
    return 1;
}

/* Frees every block c_alloc_many handed out, checking the first byte of each still holds what was
 * written. 0 when one did not. */
int c_free_all(void) {
    int ok = 1;
    for (size_t i = 0; i < count; i++) {
        if (*(unsigned char *)blocks[i] != (unsigned char)(i & 0xff)) ok = 0;
        free(blocks[i]);
    }
    count = 0;
    return ok;
}

/* The C side of the API checks: each returns 0 on success, or the number of the check that failed. */
int c_api_checks(void) {
    /* malloc_usable_size */
    char *p = malloc(100);
    if (!p || malloc_usable_size(p) < 100) return 1;
    if (malloc_usable_size(NULL) != 0) return 2;
    /* realloc keeps contents, small -> large -> small */
    for (int i = 0; i < 100; i++) p[i] = (char)i;
    p = realloc(p, 1 << 20);
    if (!p) return 3;
    for (int i = 0; i < 100; i++) if (p[i] != (char)i) return 4;
    p[(1 << 20) - 1] = 7;
    p = realloc(p, 50);
    if (!p) return 5;
    for (int i = 0; i < 50; i++) if (p[i] != (char)i) return 6;
    if (realloc(p, 0) != NULL) return 7; /* glibc: frees */
    /* calloc zeroes a recycled slot */
    for (int round = 0; round < 4; round++) {
        char *d = malloc(200);
        if (!d) return 8;
        memset(d, 0xab, 200);
        free(d);
        char *z = calloc(25, 8);
        if (!z) return 9;
        for (int i = 0; i < 200; i++) if (z[i]) return 10;
        free(z);
    }
    /* calloc overflow: ENOMEM */
    errno = 0;
    volatile size_t huge = SIZE_MAX / 2; /* volatile: gcc warns of a constant overflow */
    if (calloc(huge, 4) != NULL || errno != ENOMEM) return 11;
    /* posix_memalign: alignments and EINVAL */
    size_t aligns[] = {8, 16, 64, 4096, 65536, 1 << 21};
    for (size_t i = 0; i < sizeof aligns / sizeof *aligns; i++) {
        void *a = NULL;
        if (posix_memalign(&a, aligns[i], 1000) != 0 || !a) return 12;
        if ((uintptr_t)a % aligns[i]) return 13;
        if (malloc_usable_size(a) < 1000) return 14;
        memset(a, 1, 1000);
        free(a);
    }
    void *bad = NULL;
    if (posix_memalign(&bad, 24, 100) != EINVAL) return 15;
    /* aligned_alloc */
    void *q = aligned_alloc(256, 1024);
    if (!q || (uintptr_t)q % 256 || malloc_usable_size(q) < 1024) return 16;
    free(q);
    q = aligned_alloc(1 << 16, 1 << 17);
    if (!q || (uintptr_t)q % (1 << 16)) return 17;
    free(q);
    return 0;
}

/* Blocks handed to the Rust side and taken back. */
void *c_malloc(size_t n) { return malloc(n); }
void c_free(void *p) { free(p); }
char *c_strdup(const char *s) { return strdup(s); }
