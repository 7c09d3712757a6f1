/* The page size the program sees (sysconf, AT_PAGESZ), and whether mmap results, partial munmap and
   madvise respect it: run under qemu-aarch64 -p 16384 / -p 65536 to emulate 16 / 64 KiB pages. */
#include <stdint.h>
#include <stdio.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>
int main(void) {
  long ps = sysconf(_SC_PAGESIZE);
  printf("sysconf(_SC_PAGESIZE) %ld, getauxval(AT_PAGESZ) %lu\n", ps, getauxval(AT_PAGESZ));
  int misaligned = 0;
  for (int i = 0; i < 200; i++) {
    size_t len = 4096 * (1 + i % 7);
    char *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    if ((uintptr_t)p % ps) misaligned++;
    p[len - 1] = 1;
    if (i % 3 == 0) munmap(p, len);
  }
  printf("mmap results not aligned to %ld: %d of 200\n", ps, misaligned);
  /* Partial munmap at the page-size granularity and madvise of one page. */
  char *q = mmap(0, 4 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  q[0] = q[ps] = 5;
  printf("munmap first page: %d, madvise(DONTNEED) of 2nd page: %d, byte now %d\n",
         munmap(q, ps), madvise(q + ps, ps, MADV_DONTNEED), q[ps]);
  return 0;
}
