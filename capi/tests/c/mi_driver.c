/* A program around mimalloc's amalgamated source (static.c from the libmimalloc-sys crate), which the
 * gcc test compiles under the preload: it uses mimalloc's own heap next to the C allocator under test
 * and prints a checksum of what it computed (the same with and without the preload). */
#include <mimalloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *work(void *arg) {
  size_t seed = (size_t)arg, sum = 0;
  void *slots[256] = {0};
  for (int i = 0; i < 100000; i++) {
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    size_t k = (seed >> 33) % 256, n = (seed >> 45) % 5000 + 1;
    if (slots[k] != NULL) sum += ((unsigned char *)slots[k])[0];
    /* Alternate the two allocators; each block goes back to the one it came from. */
    if (k % 2) {
      mi_free(slots[k]);
      slots[k] = mi_malloc(n);
    } else {
      free(slots[k]);
      slots[k] = malloc(n);
    }
    memset(slots[k], (int)(n & 0xff), n);
  }
  for (int k = 0; k < 256; k++) {
    if (k % 2) mi_free(slots[k]);
    else free(slots[k]);
  }
  return (void *)sum;
}

int main(void) {
  pthread_t t[4];
  size_t total = 0;
  for (size_t i = 0; i < 4; i++) pthread_create(&t[i], NULL, work, (void *)(i + 1));
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(t[i], &r);
    total += (size_t)r;
  }
  char *s = mi_strdup("mimalloc");
  char *g = mi_realloc(s, 1 << 20);
  int ok = g != NULL && strcmp(g, "mimalloc") == 0 && mi_usable_size(g) >= (1 << 20);
  mi_free(g);
  printf("mimalloc driver: checksum %zu %s\n", total, ok ? "ok" : "BAD");
  return ok ? 0 : 1;
}
