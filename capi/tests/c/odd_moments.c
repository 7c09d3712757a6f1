/* Allocation at the odd moments of a C program's life: before main (a constructor), at thread exit
 * (pthread_key destructors that free, and allocate again), after fork in a threaded program, in a
 * dlopened library, in atexit handlers and in a destructor at process exit.
 *
 * Usage: odd_moments <path of odd_plugin.so>. Prints one line per stage, written with write(2) so that
 * the order is the order of events; the output must be the same with and without LD_PRELOAD (the Rust
 * test compares). Exit status 0 when every stage's checks passed. Each line ends with "ok" or "BAD".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int bad;

static void say(const char *fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof line - 1) n = (int)sizeof line - 1;
  ssize_t w = write(1, line, (size_t)n);
  (void)w;
}

static void stage(const char *name, int ok) {
  if (!ok) bad = 1;
  say("%s: %s\n", name, ok ? "ok" : "BAD");
}

static unsigned char pattern(size_t i, size_t k) {
  return (unsigned char)(i * 13 + k * 7 + 1);
}

/* ---- before main ---- */
enum { EARLY = 500 };
static unsigned char *early[EARLY];
static char *early_copy;

__attribute__((constructor(101))) static void before_main(void) {
  for (size_t i = 0; i < EARLY; i++) {
    size_t n = (i * 97) % 40000 + 1;
    early[i] = malloc(n);
    if (early[i] == NULL) continue;
    for (size_t k = 0; k < n; k++) early[i][k] = pattern(i, k);
  }
  /* Free every third one now: frees before main too. */
  for (size_t i = 0; i < EARLY; i += 3) {
    free(early[i]);
    early[i] = NULL;
  }
  early_copy = strdup("allocated by a constructor before main");
}

static void check_early(void) {
  int ok = early_copy != NULL && strcmp(early_copy, "allocated by a constructor before main") == 0;
  for (size_t i = 0; i < EARLY; i++) {
    if (i % 3 == 0) continue;
    size_t n = (i * 97) % 40000 + 1;
    if (early[i] == NULL) {
      ok = 0;
      continue;
    }
    for (size_t k = 0; k < n; k++)
      if (early[i][k] != pattern(i, k)) ok = 0;
    if (i % 2 == 0) {
      free(early[i]); /* the rest is freed at exit */
      early[i] = NULL;
    }
  }
  stage("constructor blocks intact in main", ok);
}

/* ---- thread exit: pthread_key destructors ---- */
static pthread_key_t key;
static atomic_int destructor_calls, second_round_calls;

struct tls_value {
  int round;
  size_t len;
  unsigned char *bytes;
};

static void tls_destructor(void *arg) {
  struct tls_value *v = arg;
  int ok = 1;
  for (size_t k = 0; k < v->len; k++)
    if (v->bytes[k] != (unsigned char)k) ok = 0;
  if (!ok) bad = 1;
  free(v->bytes);
  if (v->round == 0) {
    /* Allocate again at thread exit and set the key once more: the destructor runs a second round. */
    struct tls_value *again = malloc(sizeof *again);
    again->round = 1;
    again->len = 70000; /* a large block this time */
    again->bytes = malloc(again->len);
    for (size_t k = 0; k < again->len; k++) again->bytes[k] = (unsigned char)k;
    pthread_setspecific(key, again);
    atomic_fetch_add(&destructor_calls, 1);
  } else {
    atomic_fetch_add(&second_round_calls, 1);
  }
  free(v);
}

static void *tls_thread(void *arg) {
  size_t id = (size_t)arg;
  struct tls_value *v = malloc(sizeof *v);
  v->round = 0;
  v->len = 100 + id * 1000;
  v->bytes = malloc(v->len);
  for (size_t k = 0; k < v->len; k++) v->bytes[k] = (unsigned char)k;
  pthread_setspecific(key, v);
  /* Some garbage of this thread's heap, left for other threads to free. */
  void **left = malloc(64 * sizeof *left);
  for (int i = 0; i < 64; i++) left[i] = malloc((size_t)(i * 61 + 8));
  return left;
}

static void test_thread_exit(void) {
  enum { T = 12 };
  pthread_key_create(&key, tls_destructor);
  pthread_t t[T];
  void *left[T];
  for (size_t i = 0; i < T; i++) pthread_create(&t[i], NULL, tls_thread, (void *)i);
  for (size_t i = 0; i < T; i++) pthread_join(t[i], &left[i]);
  /* Blocks of exited threads, freed by main. */
  for (size_t i = 0; i < T; i++) {
    void **l = left[i];
    for (int k = 0; k < 64; k++) free(l[k]);
    free(l);
  }
  stage("pthread_key destructors freed and reallocated at thread exit",
        atomic_load(&destructor_calls) == T && atomic_load(&second_round_calls) == T && !bad);
}

/* ---- many short-lived threads: each heap is given up at exit, its blocks freed later by main ---- */
static void *short_lived(void *arg) {
  size_t i = (size_t)arg;
  unsigned char *p = malloc(i % 3000 + 1);
  if (p != NULL) memset(p, (int)(i & 0xff), i % 3000 + 1);
  void *scratch = malloc(i % 100000 + 1); /* freed by this thread */
  free(scratch);
  return p;
}

static void test_short_threads(void) {
  enum { TOTAL = 600, WAVE = 8 };
  int ok = 1;
  for (size_t base = 0; base < TOTAL; base += WAVE) {
    pthread_t t[WAVE];
    for (size_t k = 0; k < WAVE; k++)
      if (pthread_create(&t[k], NULL, short_lived, (void *)(base + k)) != 0) ok = 0;
    for (size_t k = 0; k < WAVE; k++) {
      void *r = NULL;
      pthread_join(t[k], &r);
      unsigned char *p = r;
      size_t i = base + k;
      if (p == NULL || p[i % 3000] != (unsigned char)(i & 0xff)) ok = 0;
      free(p);
    }
  }
  stage("600 short-lived threads, their last blocks freed by main after they exit", ok);
}

/* ---- fork in a threaded program ---- */
static atomic_int stop_churn;

static void *churn(void *arg) {
  size_t seed = (size_t)arg;
  void *slots[128] = {0};
  while (!atomic_load(&stop_churn)) {
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    size_t i = (seed >> 33) % 128;
    free(slots[i]);
    size_t n = (seed >> 40) % 8 == 0 ? (seed >> 20) % 300000 : (seed >> 20) % 2000;
    slots[i] = malloc(n);
    if (slots[i] != NULL && n > 0) ((unsigned char *)slots[i])[n - 1] = 1;
  }
  for (int i = 0; i < 128; i++) free(slots[i]);
  return NULL;
}

static void *child_thread(void *arg) {
  size_t n = (size_t)arg;
  unsigned char *p = calloc(n, 3);
  if (p == NULL) return NULL;
  for (size_t k = 0; k < 3 * n; k++)
    if (p[k] != 0) return NULL;
  free(p);
  return malloc(10);
}

static int child_work(int round) {
  /* Everything the parent's threads may have held at the fork must work here. */
  void *ps[200];
  for (int i = 0; i < 200; i++) {
    ps[i] = malloc((size_t)(i * 171 + round) % 50000 + 1);
    if (ps[i] == NULL) return 1;
    memset(ps[i], i, (size_t)(i * 171 + round) % 50000 + 1);
  }
  for (int i = 0; i < 200; i += 2) free(ps[i]);
  pthread_t t;
  if (pthread_create(&t, NULL, child_thread, (void *)(size_t)(1000 + round)) != 0) return 2;
  void *r = NULL;
  pthread_join(t, &r);
  if (r == NULL) return 3;
  free(r);
  for (int i = 1; i < 200; i += 2) free(ps[i]);
  char *s = NULL;
  if (asprintf(&s, "child %d", round) < 0) return 4;
  free(s);
  return 0;
}

/* A thread other than main forks while the churners run. */
static void *forking_thread(void *arg) {
  long good = 0;
  for (int round = 0; round < 10; round++) {
    pid_t pid = fork();
    if (pid == 0) _exit(child_work(100 + round + (int)(size_t)arg));
    int status = 0;
    if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0) good++;
  }
  return (void *)good;
}

static void test_fork(void) {
  enum { CHURNERS = 3, FORKS = 40 };
  pthread_t t[CHURNERS];
  for (size_t i = 0; i < CHURNERS; i++) pthread_create(&t[i], NULL, churn, (void *)(i + 1));
  int good = 0;
  for (int round = 0; round < FORKS; round++) {
    void *held = malloc((size_t)round * 100 + 1);
    pid_t pid = fork();
    if (pid == 0) {
      free(held); /* a block of the parent's heap, freed in the child */
      _exit(child_work(round));
    }
    int status = 0;
    if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
      good++;
    else
      say("fork round %d: child status %d\n", round, status);
    free(held);
  }
  pthread_t forker;
  void *forked = NULL;
  pthread_create(&forker, NULL, forking_thread, NULL);
  pthread_join(forker, &forked);
  atomic_store(&stop_churn, 1);
  for (int i = 0; i < CHURNERS; i++) pthread_join(t[i], NULL);
  stage("fork while threads allocate: children allocate, free, start threads", good == FORKS);
  stage("fork from a thread other than main", forked == (void *)10);
}

/* ---- a dlopened library ---- */
static void test_dlopen(const char *path) {
  int ok = 1;
  for (int round = 0; round < 3; round++) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
      say("dlopen: %s\n", dlerror());
      stage("dlopen", 0);
      return;
    }
    char *(*make)(size_t, int) = (char *(*)(size_t, int))dlsym(h, "plugin_make");
    unsigned long (*take)(unsigned char *, size_t) = (unsigned long (*)(unsigned char *, size_t))dlsym(h, "plugin_take");
    int (*table_ok)(void) = (int (*)(void))dlsym(h, "plugin_table_ok");
    if (make == NULL || take == NULL || table_ok == NULL) {
      stage("dlsym in the plugin", 0);
      return;
    }
    if (!table_ok()) ok = 0;
    for (size_t n = 1; n < 3000000; n = n * 3 + 1) {
      /* The plugin's block, freed here; this program's block, freed there. */
      char *p = make(n, 0x11);
      if (p == NULL || p[n - 1] != 0x11) ok = 0;
      free(p);
      unsigned char *q = malloc(n);
      memset(q, 2, n);
      if (take(q, n) != 2ul * n) ok = 0;
    }
    if (dlclose(h) != 0) ok = 0;
  }
  stage("dlopened library allocates in its constructor, frees ours, dlclose frees its table", ok);
}

/* ---- many dlopened libraries with thread-local storage, used from threads ---- */
enum { COPIES = 24, TLS_THREADS = 4 };
static int (*tls_fns[COPIES])(int);

static void *tls_user(void *arg) {
  (void)arg;
  long ok = 1;
  for (int round = 1; round <= 3; round++)
    for (int i = 0; i < COPIES; i++)
      if (tls_fns[i](round) != round) ok = 0;
  return (void *)ok;
}

static int copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  int ok = in != NULL && out != NULL;
  char buf[65536];
  size_t n;
  while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, out) != n) ok = 0;
  if (in) fclose(in);
  if (out && fclose(out) != 0) ok = 0;
  return ok;
}

static void test_dlopen_tls(const char *path) {
  /* Copies under other names: each is a new module with its own TLS block, more than the DTV's spare
   * slots, so ld.so grows every thread's DTV (malloc, realloc, free inside the dynamic linker). */
  void *handles[COPIES];
  char names[COPIES][4096];
  int ok = 1;
  for (int i = 0; i < COPIES; i++) {
    snprintf(names[i], sizeof names[i], "%s.copy%d.so", path, i);
    ok &= copy_file(path, names[i]);
    handles[i] = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (handles[i] == NULL) {
      say("dlopen %s: %s\n", names[i], dlerror());
      stage("dlopen copies", 0);
      return;
    }
    tls_fns[i] = (int (*)(int))dlsym(handles[i], "plugin_tls");
    if (tls_fns[i] == NULL) ok = 0;
  }
  if (ok) {
    pthread_t t[TLS_THREADS];
    for (int i = 0; i < TLS_THREADS; i++) pthread_create(&t[i], NULL, tls_user, NULL);
    for (int i = 0; i < TLS_THREADS; i++) {
      void *r = NULL;
      pthread_join(t[i], &r);
      if (r != (void *)1) ok = 0;
    }
    if (tls_user(NULL) != (void *)1) ok = 0; /* and the main thread */
  }
  for (int i = 0; i < COPIES; i++) {
    if (dlclose(handles[i]) != 0) ok = 0;
    unlink(names[i]);
  }
  stage("24 dlopened libraries with TLS used from 5 threads, then dlclosed", ok);
}

/* ---- process exit ---- */
static char *at_exit_block;

static void at_exit_second(void) {
  /* Runs after at_exit_first was registered later, so first: LIFO. Frees main's remains. */
  int ok = 1;
  for (size_t i = 0; i < EARLY; i++) {
    if (early[i] == NULL) continue;
    size_t n = (i * 97) % 40000 + 1;
    if (early[i][n - 1] != pattern(i, n - 1)) ok = 0;
    free(early[i]);
  }
  free(early_copy);
  stage("atexit handler frees the constructor's blocks", ok);
}

static void at_exit_first(void) {
  at_exit_block = malloc(123456);
  memset(at_exit_block, 9, 123456);
  char *s = NULL;
  int ok = asprintf(&s, "%s", "an atexit handler allocates") > 0;
  free(s);
  stage("atexit handler allocates", ok && at_exit_block != NULL);
}

__attribute__((destructor)) static void at_process_exit(void) {
  int ok = at_exit_block != NULL && at_exit_block[123455] == 9;
  free(at_exit_block);
  void *late = malloc(50);
  free(late);
  stage("destructor frees after the atexit handlers", ok && late != NULL);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    say("usage: odd_moments <odd_plugin.so>\n");
    return 2;
  }
  check_early();
  test_thread_exit();
  test_short_threads();
  test_fork();
  test_dlopen(argv[1]);
  test_dlopen_tls(argv[1]);
  atexit(at_exit_second);
  atexit(at_exit_first);
  stage("main returns", !bad);
  return bad;
}
