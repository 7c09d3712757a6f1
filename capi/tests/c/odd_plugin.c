/* The shared library odd_moments dlopens: it allocates in its constructor, hands blocks to the program and
 * frees the program's blocks, and frees its own table in its destructor (at dlclose). */
#include <stdlib.h>
#include <string.h>

static char **table;
/* Thread-local storage in a dlopened library: its first use in each thread goes through __tls_get_addr,
 * which allocates the block (and grows the thread's DTV when many such libraries are loaded). */
static __thread unsigned char tls_block[3000];
static __thread int tls_uses;
static size_t table_len;

__attribute__((constructor)) static void plugin_init(void) {
  table_len = 300;
  table = calloc(table_len, sizeof *table);
  for (size_t i = 0; i < table_len; i++) {
    table[i] = malloc(i * 37 + 1);
    memset(table[i], (int)(i & 0x7f), i * 37 + 1);
  }
}

__attribute__((destructor)) static void plugin_fini(void) {
  for (size_t i = 0; i < table_len; i++) free(table[i]);
  free(table);
  table = NULL;
}

/* A block of n bytes filled with `byte`, for the caller to free. */
char *plugin_make(size_t n, int byte) {
  char *p = malloc(n);
  if (p != NULL) memset(p, byte, n);
  return p;
}

/* Frees a block the program allocated, after summing its bytes. */
unsigned long plugin_take(unsigned char *p, size_t n) {
  unsigned long sum = 0;
  for (size_t i = 0; i < n; i++) sum += p[i];
  free(p);
  return sum;
}

/* Checks the constructor's table: 1 when every block still holds its bytes. */
int plugin_table_ok(void) {
  for (size_t i = 0; i < table_len; i++)
    for (size_t k = 0; k < i * 37 + 1; k++)
      if (table[i][k] != (char)(i & 0x7f)) return 0;
  /* Grow every block: reallocs inside the plugin, of the constructor's blocks. */
  for (size_t i = 0; i < table_len; i++) {
    char *g = realloc(table[i], i * 37 + 1 + 50000);
    if (g == NULL || g[i * 37] != (char)(i & 0x7f)) return 0;
    table[i] = g;
  }
  return 1;
}

/* Writes `byte` over this thread's copy of the plugin's TLS block and returns how many times this thread
 * called it (the block must still hold the previous call's byte). */
int plugin_tls(int byte) {
  if (tls_uses > 0 && tls_block[2999] != (unsigned char)(byte - 1)) return -1;
  memset(tls_block, byte, sizeof tls_block);
  return ++tls_uses;
}
