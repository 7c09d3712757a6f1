// Sized delete given the wrong size, for the hardened library's check: `sized_delete CASE`.
//   right:       new 100 bytes, delete with 100 (must run to the end)
//   wrong-class: new 100 bytes, delete with 4000 (another size class)
//   small-size-of-large: new 1 MiB, delete with 64 (a slot's size for a large block)
// Prints "survived" when it gets to the end.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

static void *volatile sink;

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  size_t n = std::strcmp(argv[1], "small-size-of-large") == 0 ? size_t(1) << 20 : 100;
  size_t told = std::strcmp(argv[1], "right") == 0 ? n
                : std::strcmp(argv[1], "wrong-class") == 0 ? 4000
                                                           : 64;
  void *p = ::operator new(n);
  std::memset(p, 1, n);
  sink = p;
  ::operator delete(sink, told);
  for (int i = 0; i < 1000; i++) ::operator delete(::operator new(n), n);
  std::puts("survived");
  return 0;
}
