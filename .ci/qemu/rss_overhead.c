/* tests/stats.rs's shape without poolalloc: 4 threads map and touch 256 MiB in 1 MiB pieces, 4 other
   threads unmap all of it. Prints the RSS (from /proc/self/statm, as poolalloc::stats reads it) at the
   start, the peak and the end, and exits 1 if the end is more than 1 MiB above the start: natively it
   is a few hundred KiB; under qemu-user statm is the emulator's and counts its own heap and
   translated code. Argument: seconds to sleep at the end (for a look at /proc/<pid>/smaps). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#define N 64
static char *pieces[4][N];
static long statm_pages(void) {
  long size, res;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f || fscanf(f, "%ld %ld", &size, &res) != 2) return -1;
  fclose(f);
  return res;
}
static void *fill(void *a) {
  long t = (long)a;
  for (int i = 0; i < N; i++) {
    pieces[t][i] = mmap(0, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pieces[t][i] == MAP_FAILED) abort();
    memset(pieces[t][i], 7, 1 << 20);
  }
  return 0;
}
static void *drop(void *a) {
  long t = (long)a;
  for (int i = 0; i < N; i++) munmap(pieces[t][i], 1 << 20);
  return 0;
}
static void run(void *(*f)(void *)) {
  pthread_t th[4];
  for (long t = 0; t < 4; t++) pthread_create(&th[t], 0, f, (void *)t);
  for (int t = 0; t < 4; t++) pthread_join(th[t], 0);
}
int main(int argc, char **argv) {
  long ps = sysconf(_SC_PAGESIZE) / 1024;
  long a = statm_pages();
  run(fill);
  long b = statm_pages();
  run(drop);
  long c = statm_pages();
  printf("statm resident pages: start %ld, peak %ld, end %ld; at the page size %ld KiB: start %ld KiB, "
         "end %+ld KiB over it\n", a, b, c, ps, a * ps, (c - a) * ps);
  fflush(stdout);
  if (argc > 1) sleep(atoi(argv[1]));
  return (c - a) * ps > 1024;
}
