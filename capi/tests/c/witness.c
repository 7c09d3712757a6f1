/* Preloaded after the library under test, in every process a test starts (children included): records
 * which library malloc, free, calloc and realloc resolve to in that process, so the test can check that
 * the preload was in effect everywhere. Appends one line "<exe>\t<malloc's library>\t<ok|MIXED>" to the
 * file named by POOLALLOC_TEST_WITNESS_LOG ("MIXED" when the four do not come from the same library). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct lookup {
  const char *name;
  const char *found;
};

/* Objects are visited in load order: the program, the preloaded libraries, then their dependencies, the
 * order in which the dynamic linker searches for a symbol. The first one that defines `name` itself is
 * where the program's calls go. (dlsym(RTLD_DEFAULT) would not do: in a program built without -fPIE that
 * takes malloc's address, such as gcc's cc1, it returns the program's own PLT entry.) */
static int visit(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  struct lookup *l = data;
  if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0') return 0; /* the program itself */
  void *h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
  if (h == NULL) return 0;
  void *sym = dlsym(h, l->name);
  Dl_info di;
  if (sym != NULL && dladdr(sym, &di) != 0 && di.dli_fname != NULL && strcmp(di.dli_fname, info->dlpi_name) == 0)
    l->found = info->dlpi_name;
  dlclose(h);
  return l->found != NULL;
}

static const char *library_of(const char *name) {
  struct lookup l = {name, NULL};
  dl_iterate_phdr(visit, &l);
  return l.found != NULL ? l.found : "(none)";
}

__attribute__((constructor)) static void witness(void) {
  const char *log = getenv("POOLALLOC_TEST_WITNESS_LOG");
  if (log == NULL) return;
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  const char *m = library_of("malloc");
  int same = strcmp(m, library_of("free")) == 0 && strcmp(m, library_of("calloc")) == 0 &&
             strcmp(m, library_of("realloc")) == 0;
  char line[2 * PATH_MAX + 16];
  int len = snprintf(line, sizeof line, "%s\t%s\t%s\n", exe, m, same ? "ok" : "MIXED");
  int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  /* One write with O_APPEND: lines of concurrent processes do not interleave. */
  ssize_t w = write(fd, line, (size_t)(len < (int)sizeof line ? len : (int)sizeof line - 1));
  (void)w;
  close(fd);
}
