// A catalogue of heap misuse, one case per run: `misuse CASE` does the misuse and then what a
// program does next (more allocations and frees of the same size), and prints "survived" if the
// allocator let it go on; `misuse --list` prints the cases. The Rust test (`capi/tests/misuse.rs`)
// runs every case under an allocator and counts which ones stop the program (an abort naming the
// problem, or a signal).
//
// Written for poolalloc's tests from the list of misuse kinds (double and invalid frees, writes
// after free, overflows and underflows by one byte and by a megabyte, underflows by 1 and 32 bytes
// of a lone block, plain and through memcpy, a freed block reused for a smaller one, zero-size
// access; a block reused at once, a copy past a block's end and a write after free followed by an
// allocation of another size), at three
// sizes: 8 B (the smallest class), 4 KiB (a mid class) and 256 KiB (a large block).
//
// The heap around the victim is a common one: eight blocks of the size, every other one freed, so
// that the victim's neighbours are free blocks waiting on the allocator's lists; except in the
// "lone" cases, where the victim is the first block of its size the process allocates, and in
// reuse_downsize (a freed block's address handed out again at once for a smaller block).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

// Hides a pointer's origin from the compiler, so that it neither warns about nor optimizes away
// the misuse.
static void *launder(void *p) {
  void *volatile q = p;
  return q;
}

static char global_array[64];

static size_t n; // the case's size

static char *blocks[8];

static char *setup(void) {
  for (int i = 0; i < 8; i++) {
    blocks[i] = malloc(n);
    if (!blocks[i]) {
      printf("malloc failed\n");
      exit(2);
    }
    memset(blocks[i], 'a' + i, n);
  }
  for (int i = 1; i < 8; i += 2) {
    free(blocks[i]);
    blocks[i] = NULL;
  }
  return launder(blocks[4]);
}

// What a program does after the misuse: allocations and frees of the size (handing out the blocks
// the misuse touched), then of a few other sizes.
static void go_on(void) {
  // At least 64 blocks and 2 MiB: enough that every free block of the size is handed out again.
  size_t count = n < (2u << 20) / 64 ? (2u << 20) / n : 64;
  char **q = malloc(count * sizeof *q);
  if (!q) return;
  for (size_t i = 0; i < count; i++) {
    q[i] = malloc(n);
    if (q[i]) q[i][0] = 1;
  }
  for (size_t i = 0; i < count; i++) free(q[i]);
  free(q);
  for (size_t s = 8; s <= (1u << 20); s *= 4) {
    char *p = malloc(s);
    if (p) p[s - 1] = 1;
    p = realloc(p, s * 2);
    free(p);
  }
  for (int i = 0; i < 8; i++) free(blocks[i]);
}

typedef void (*misuse_fn)(void);

static void double_free(void) {
  char *p = setup();
  free(p);
  free(launder(p));
  blocks[4] = NULL;
}
static void double_free_interleaved(void) {
  char *p = setup();
  char *q = malloc(n);
  free(p);
  free(q);
  free(launder(p));
  blocks[4] = NULL;
}
static void realloc_freed(void) {
  char *p = setup();
  free(p);
  char *r = realloc(launder(p), n * 2);
  blocks[4] = r;
}
static void free_interior(void) {
  char *p = setup();
  free(launder(p + n / 2));
}
static void free_unaligned(void) {
  char *p = setup();
  free(launder(p + 1));
}
static void free_stack(void) {
  char local[64];
  memset(local, 1, sizeof local);
  setup();
  free(launder(local));
}
static void free_wild_1(void) {
  setup();
  free(launder((void *)1));
}
static void free_low_page(void) {
  setup();
  free(launder((void *)0x1000));
}
static void free_unmapped(void) {
  setup();
  // A page that was mapped and is no longer: nothing is there.
  char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) exit(2);
  munmap(p, 4096);
  free(launder(p + 64));
}
static void free_global(void) {
  setup();
  free(launder(global_array));
}
static void write_after_free_start(void) {
  char *p = setup();
  free(p);
  memset(launder(p), 'W', 8);
  blocks[4] = NULL;
}
static void write_after_free_middle(void) {
  char *p = setup();
  free(p);
  ((volatile char *)launder(p))[n / 2] = 'W';
  blocks[4] = NULL;
}
static void overflow_1(void) {
  char *p = setup();
  ((volatile char *)launder(p))[n] = 'O';
}
static void overflow_1m(void) {
  char *p = setup();
  ((volatile char *)launder(p))[n + (1 << 20)] = 'O';
}
static void underflow_1(void) {
  char *p = setup();
  ((volatile char *)launder(p))[-1] = 'U';
}
static void underflow_1m(void) {
  char *p = setup();
  ((volatile char *)launder(p))[-(1 << 20)] = 'U';
}
// The "lone" cases: the victim is the process's first block of its size (no setup, so nothing of
// the size was allocated before it), as in a small program that allocates once and writes below
// the block, by a plain store or through memcpy (which copies the block's size from 1 or 32 bytes
// before its start: the bytes below it and all but the last 1 or 32 of the block itself).
static char copy_src[256 * 1024];
static char *lone(void) {
  char *p = malloc(n);
  if (!p) {
    printf("malloc failed\n");
    exit(2);
  }
  memset(p, 'l', n);
  return launder(p);
}
static void lone_underflow_1(void) {
  char *p = lone();
  ((volatile char *)p)[-1] ^= 'U';
  free(p);
}
static void lone_underflow_32(void) {
  char *p = lone();
  ((volatile char *)p)[-32] ^= 'U';
  free(p);
}
static void lone_memcpy_underflow_1(void) {
  char *p = lone();
  memcpy(launder(p - 1), copy_src, n);
}
static void lone_memcpy_underflow_32(void) {
  char *p = lone();
  memcpy(launder(p - 32), copy_src, n);
}
static void lone_underflow_1m(void) {
  char *p = lone();
  ((volatile char *)p)[-(1 << 20)] ^= 'U';
  free(p);
}
// A freed block reused at once for a smaller one: a dangling pointer to the freed block would
// then reach the new one. Reported as an exit of 4 with "not reused" when the smaller block lies
// elsewhere (what the Rust test counts as caught), else the program goes on.
static void reuse_downsize(void) {
  char *p = lone();
  free(p);
  char *q = malloc(n / 2);
  if (q != p) {
    printf("not reused\n");
    fflush(stdout);
    exit(4);
  }
  free(q);
}
// The same, for a block of the same size.
static void reuse_same(void) {
  char *p = lone();
  free(p);
  char *q = malloc(n);
  if (q != p) {
    printf("not reused\n");
    fflush(stdout);
    exit(4);
  }
  free(q);
}
// A copy 32 bytes past the block's end (zeros), never followed by the block's free: only the
// allocations that follow can notice.
static char copy_src_32[256 * 1024 + 32];
static void memcpy_overflow_32(void) {
  char *p = setup();
  memcpy(launder(p), copy_src_32, n + 32);
}
// A write after free followed at once by an allocation of another size.
static void write_after_free_other_size(void) {
  char *p = setup();
  free(p);
  ((volatile char *)p)[0] = 'W';
  free(launder(malloc(24)));
}
static void zero_size_read(void) {
  setup();
  volatile char *p = launder(malloc(0));
  char c = p[0];
  printf("read %d\n", c != 0);
  free((void *)p);
}
static void zero_size_write(void) {
  setup();
  volatile char *p = launder(malloc(0));
  p[0] = 'Z';
  free((void *)p);
}

// Not a misuse: what C allows of zero-size blocks (distinct, freeable, reallocable, usable size
// 0); must survive under every allocator.
static void zero_size_legal(void) {
  setup();
  char *a = malloc(0), *b = malloc(0), *c = calloc(0, 8);
  if (a == b || (a && a == c) || (b && b == c)) {
    printf("zero-size blocks not distinct\n");
    exit(3);
  }
  a = realloc(a, 100);
  if (!a) exit(3);
  memset(a, 'r', 100);
  free(a);
  free(b);
  free(c);
}

struct kind {
  const char *name;
  misuse_fn run;
  int sized; // 1: run at each of the three sizes; 0: once, at 8 bytes for its neighbours
};

static const struct kind KINDS[] = {
    {"double_free", double_free, 1},
    {"double_free_interleaved", double_free_interleaved, 1},
    {"realloc_freed", realloc_freed, 1},
    {"free_interior", free_interior, 1},
    {"free_unaligned", free_unaligned, 1},
    {"free_stack", free_stack, 0},
    {"free_global", free_global, 0},
    {"free_wild_1", free_wild_1, 0},
    {"free_low_page", free_low_page, 0},
    {"free_unmapped", free_unmapped, 0},
    {"write_after_free_start", write_after_free_start, 1},
    {"write_after_free_middle", write_after_free_middle, 1},
    {"overflow_1", overflow_1, 1},
    {"overflow_1m", overflow_1m, 1},
    {"underflow_1", underflow_1, 1},
    {"underflow_1m", underflow_1m, 1},
    {"lone_underflow_1", lone_underflow_1, 1},
    {"lone_underflow_32", lone_underflow_32, 1},
    {"lone_memcpy_underflow_1", lone_memcpy_underflow_1, 1},
    {"lone_memcpy_underflow_32", lone_memcpy_underflow_32, 1},
    {"lone_underflow_1m", lone_underflow_1m, 1},
    {"reuse_downsize", reuse_downsize, 1},
    {"reuse_same", reuse_same, 1},
    {"memcpy_overflow_32", memcpy_overflow_32, 1},
    {"write_after_free_other_size", write_after_free_other_size, 1},
    {"zero_size_read", zero_size_read, 0},
    {"zero_size_write", zero_size_write, 0},
    {"zero_size_legal", zero_size_legal, 0},
};

static const struct {
  const char *suffix;
  size_t size;
} SIZES[] = {{"8", 8}, {"4k", 4096}, {"256k", 256 * 1024}};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: misuse CASE | --list\n");
    return 2;
  }
  char name[100];
  for (size_t k = 0; k < COUNT(KINDS); k++) {
    for (size_t s = 0; s < (KINDS[k].sized ? COUNT(SIZES) : 1); s++) {
      if (KINDS[k].sized)
        snprintf(name, sizeof name, "%s_%s", KINDS[k].name, SIZES[s].suffix);
      else
        snprintf(name, sizeof name, "%s", KINDS[k].name);
      if (strcmp(argv[1], "--list") == 0) {
        printf("%s\n", name);
      } else if (strcmp(argv[1], name) == 0) {
        n = SIZES[s].size;
        fflush(stdout);
        KINDS[k].run();
        go_on();
        printf("survived\n");
        return 0;
      }
    }
  }
  if (strcmp(argv[1], "--list") == 0) return 0;
  fprintf(stderr, "misuse: no case %s\n", argv[1]);
  return 2;
}
