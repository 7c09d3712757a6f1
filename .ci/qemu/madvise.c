/* MADV_DONTNEED on mappings made the ways poolalloc makes them (plain, MAP_NORESERVE, aligned by
   over-mapping and unmapping head and tail, grown by mremap): is the RSS given back? */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
static long rss_kib(void) {
  long size, res; FILE *f = fopen("/proc/self/statm", "r");
  if (!f || fscanf(f, "%ld %ld", &size, &res) != 2) return -1;
  fclose(f); return res * (sysconf(_SC_PAGESIZE) / 1024);
}
static void check(const char *what, char *p, size_t len) {
  long a = rss_kib(); memset(p, 7, len); long b = rss_kib();
  int r = madvise(p, len, MADV_DONTNEED); long c = rss_kib();
  printf("%-28s touched +%6ld KiB, after MADV_DONTNEED +%6ld KiB (rc %d, byte now %d)\n", what, b - a, c - a, r, p[len - 1]);
  munmap(p, len);
}
int main(void) {
  size_t len = 64u << 20, al = 4u << 20;
  int prot = PROT_READ | PROT_WRITE, fl = MAP_PRIVATE | MAP_ANONYMOUS;
  check("plain", mmap(0, len, prot, fl, -1, 0), len);
  check("MAP_NORESERVE", mmap(0, len, prot, fl | MAP_NORESERVE, -1, 0), len);
  char *raw = mmap(0, len + al, prot, fl, -1, 0);
  uintptr_t s = ((uintptr_t)raw + al - 1) & ~(uintptr_t)(al - 1);
  if (s != (uintptr_t)raw) munmap(raw, s - (uintptr_t)raw);
  if ((uintptr_t)raw + len + al != s + len) munmap((char *)s + len, (uintptr_t)raw + len + al - s - len);
  check("aligned (head/tail unmapped)", (char *)s, len);
  char *m = mmap(0, len / 2, prot, fl, -1, 0); memset(m, 1, len / 2);
  m = mremap(m, len / 2, len, MREMAP_MAYMOVE);
  check("grown by mremap", m, len);
  return 0;
}
