// N malloc+free pairs of one size, for instruction counts of the C library's paths under
// callgrind (benches/results/hardened-c.md, 2026-12-05):
//
//   cc -O2 -o /tmp/pairs benches/security/pairs.c
//   LD_PRELOAD=.../libpoolalloc_c.so valgrind --tool=callgrind /tmp/pairs N SIZE
//
// Instructions per pair = (total at N) - (total at 0), divided by N.
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  long n = atol(argv[1]);
  size_t size = (size_t)atol(argv[2]);
  void *volatile sink;
  // Warm-up: the class's chunk carved and (hardened-full) the quarantine filled.
  for (int i = 0; i < 64; i++) {
    void *p = malloc(size);
    sink = p;
    free(p);
  }
  for (long i = 0; i < n; i++) {
    void *p = malloc(size);
    sink = p;
    free(p);
  }
  (void)sink;
  return 0;
}
