// Every replaceable form of operator new and delete, as a C++ program uses them: plain, arrays,
// over-aligned types, nothrow, sized delete (g++ emits it for C++14 and later), the failure paths
// (nothrow gives null; the throwing forms call the new-handler until there is none, then throw
// std::bad_alloc, which the program catches) and objects deleted by another thread.
//
// Prints one line per stage ending in "ok" or "BAD", and "note: SYMBOL from LIBRARY" for each
// operator's symbol (where the dynamic linker found it; the Rust test checks those under the
// preload). Exit status 0 when every stage passed.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

static bool bad = false;

static void stage(const char *name, bool ok) {
  if (!ok) bad = true;
  std::printf("%s: %s\n", name, ok ? "ok" : "BAD");
  std::fflush(stdout);
}

static const char *const SYMBOLS[] = {
    "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t",
    "_ZnamSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t",
    "_ZnamSt11align_val_tRKSt9nothrow_t", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm",
    "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t", "_ZdlPvSt11align_val_t",
    "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t", "_ZdaPvSt11align_val_tRKSt9nothrow_t", "malloc",
};

// A size no allocator can serve (2^62 bytes), hidden from the optimizer.
static volatile size_t huge_size = size_t(1) << 62;

struct alignas(64) Line {
  char bytes[64];
};
struct alignas(4096) Page {
  char bytes[100];
};
struct alignas(128) Odd {
  std::string name;
  int n;
  Odd() : name("odd object with a name too long for the small-string buffer"), n(7) {}
};

static bool aligned(const void *p, size_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

static int handler_calls = 0;
static int handler_limit = 0;
static void counting_handler() {
  if (++handler_calls >= handler_limit) std::set_new_handler(nullptr);
}

int main() {
  for (const char *s : SYMBOLS) {
    void *f = dlsym(RTLD_DEFAULT, s);
    Dl_info info;
    if (f && dladdr(f, &info) && info.dli_fname)
      std::printf("note: %s from %s\n", s, info.dli_fname);
    else
      std::printf("note: %s from nowhere\n", s);
  }

  // Plain and array forms, every size up to 64 KiB in steps, written over and checked.
  {
    bool ok = true;
    for (size_t n = 1; n <= 65536; n += n / 8 + 1) {
      char *a = new char[n];
      std::memset(a, int(n & 0xff), n);
      int *i = new int(int(n));
      ok = ok && aligned(a, n >= 16 ? 16 : 1) && *i == int(n) && a[n - 1] == char(n & 0xff);
      delete i;     // sized: _ZdlPvm
      delete[] a;   // unsized for char[]: _ZdaPv
    }
    stage("new and delete of every size", ok);
  }

  // Arrays of objects with destructors: new[] adds a cookie, delete[] passes the same total size.
  {
    bool ok = true;
    for (int n = 1; n < 2000; n = n * 3 + 1) {
      std::string *s = new std::string[n];
      for (int k = 0; k < n; k++) s[k] = "element " + std::to_string(k) + " of an array of strings";
      ok = ok && s[n - 1] == "element " + std::to_string(n - 1) + " of an array of strings";
      delete[] s;  // _ZdaPvm where the compiler knows the size, else _ZdaPv
    }
    stage("arrays of objects with destructors", ok);
  }

  // Explicit sized deletes of every size class and of large blocks.
  {
    bool ok = true;
    std::vector<std::pair<void *, size_t>> blocks;
    for (size_t n = 0; n <= (size_t(1) << 21); n = n < 64 ? n + 1 : n + n / 3) {
      void *p = ::operator new(n);
      std::memset(p, 0x5a, n);
      blocks.push_back({p, n});
    }
    for (auto &b : blocks) {
      const unsigned char *c = static_cast<const unsigned char *>(b.first);
      if (b.second && (c[0] != 0x5a || c[b.second - 1] != 0x5a)) ok = false;
      ::operator delete(b.first, b.second);
    }
    blocks.clear();
    for (size_t n = 1; n <= 100000; n += 999) {
      void *p = ::operator new[](n);
      static_cast<char *>(p)[n - 1] = 1;
      ::operator delete[](p, n);
    }
    stage("sized delete of small and large blocks", ok);
  }

  // Over-aligned types (the align_val_t forms), single and arrays, sized and unsized.
  {
    bool ok = true;
    std::vector<Line *> lines;
    std::vector<Page *> pages;
    for (int k = 0; k < 300; k++) {
      lines.push_back(new Line);
      std::memset(lines.back()->bytes, k, sizeof(Line::bytes));
      if (k % 10 == 0) pages.push_back(new Page);
    }
    for (Line *l : lines) ok = ok && aligned(l, 64);
    for (Page *p : pages) ok = ok && aligned(p, 4096);
    for (Line *l : lines) delete l;  // _ZdlPvmSt11align_val_t
    for (Page *p : pages) delete p;
    Odd *odd = new Odd[37];
    ok = ok && aligned(odd, 128) && odd[36].n == 7 && odd[36].name.size() > 40;
    delete[] odd;  // _ZdaPvmSt11align_val_t (or unsized)
    for (size_t a = 1; a <= (size_t(1) << 20); a <<= 1) {
      for (size_t n : {size_t(1), size_t(24), size_t(1000), size_t(40000), size_t(300000)}) {
        void *p = ::operator new(n, std::align_val_t(a));
        void *q = ::operator new[](n, std::align_val_t(a));
        ok = ok && aligned(p, a) && aligned(q, a);
        std::memset(p, 1, n);
        std::memset(q, 2, n);
        if (n % 2) {
          ::operator delete(p, n, std::align_val_t(a));
          ::operator delete[](q, n, std::align_val_t(a));
        } else {
          ::operator delete(p, std::align_val_t(a));
          ::operator delete[](q, std::align_val_t(a));
        }
      }
    }
    stage("over-aligned new and delete", ok);
  }

  // nothrow forms: blocks when there is memory, null when there is none.
  {
    bool ok = true;
    int *i = new (std::nothrow) int(5);
    Line *l = new (std::nothrow) Line;
    char *a = new (std::nothrow) char[300];
    ok = ok && i && *i == 5 && l && aligned(l, 64) && a;
    delete i;
    delete l;
    delete[] a;
    void *p = ::operator new(huge_size, std::nothrow);
    void *q = ::operator new[](huge_size, std::nothrow);
    void *r = ::operator new(huge_size, std::align_val_t(64), std::nothrow);
    void *t = ::operator new[](huge_size, std::align_val_t(64), std::nothrow);
    ok = ok && !p && !q && !r && !t;
    void *u = ::operator new(100, std::align_val_t(256), std::nothrow);
    ok = ok && u && aligned(u, 256);
    ::operator delete(u, std::align_val_t(256), std::nothrow);
    ::operator delete(nullptr, std::nothrow);
    ::operator delete[](nullptr, std::nothrow);
    stage("nothrow forms: a block, or null when out of memory", ok);
  }

  // The throwing forms throw std::bad_alloc, which is caught; delete of null does nothing.
  {
    int caught = 0;
    try {
      void *p = ::operator new(huge_size);
      std::printf("note: got %p\n", p);
    } catch (const std::bad_alloc &) {
      caught++;
    }
    try {
      char *p = new char[huge_size];
      std::printf("note: got %p\n", static_cast<void *>(p));
    } catch (const std::bad_alloc &) {
      caught++;
    }
    try {
      void *p = ::operator new(huge_size, std::align_val_t(4096));
      std::printf("note: got %p\n", p);
    } catch (const std::bad_alloc &e) {
      caught += std::strlen(e.what()) > 0;
    }
    try {
      void *p = ::operator new[](huge_size, std::align_val_t(32));
      std::printf("note: got %p\n", p);
    } catch (const std::exception &) {
      caught++;
    }
    delete static_cast<int *>(nullptr);
    delete[] static_cast<int *>(nullptr);
    stage("std::bad_alloc thrown and caught", caught == 4);
  }

  // The new-handler is called until it uninstalls itself, then bad_alloc (or null for nothrow).
  {
    handler_calls = 0;
    handler_limit = 3;
    std::set_new_handler(counting_handler);
    bool threw = false;
    try {
      void *p = ::operator new(huge_size);
      std::printf("note: got %p\n", p);
    } catch (const std::bad_alloc &) {
      threw = true;
    }
    bool ok = threw && handler_calls == 3;
    handler_calls = 0;
    handler_limit = 2;
    std::set_new_handler(counting_handler);
    void *p = ::operator new(huge_size, std::nothrow);
    ok = ok && !p && handler_calls == 2;
    stage("new-handler called until none, then bad_alloc or null", ok);
  }

  // A handler that throws something else: it propagates out of operator new.
  {
    std::set_new_handler([] { throw std::runtime_error("from the handler"); });
    std::string what;
    try {
      void *p = ::operator new[](huge_size);
      std::printf("note: got %p\n", p);
    } catch (const std::runtime_error &e) {
      what = e.what();
    }
    std::set_new_handler(nullptr);
    stage("a throwing new-handler's exception reaches the caller", what == "from the handler");
  }

  // Objects made on one thread, deleted (sized) on another, both ways at once.
  {
    const int N = 20000;
    std::vector<std::unique_ptr<std::string>> made_here(N);
    std::vector<std::unique_ptr<std::string>> made_there(N);
    for (int k = 0; k < N; k++) made_here[k].reset(new std::string(size_t(16 + k % 200), 'a' + k % 26));
    std::thread t([&] {
      for (int k = 0; k < N; k++) made_there[k].reset(new std::string(size_t(16 + k % 300), 'b'));
      made_here.clear();
    });
    t.join();
    bool ok = made_here.empty() && made_there[N - 1]->size() == size_t(16 + (N - 1) % 300);
    made_there.clear();
    stage("objects deleted by another thread", ok);
  }

  return bad ? 1 : 0;
}
