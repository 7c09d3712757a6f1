// C++ allocation through the C allocator: new/delete (sized, arrays, over-aligned), containers, a
// thread_local object whose destructor frees (and allocates) at thread exit, a static object destroyed
// at process exit, exceptions (the runtime allocates them with malloc).
//
// Prints one line per stage ending in "ok" or "BAD"; the Rust test compares the output with and
// without LD_PRELOAD. Exit status 0 when every check done before exit passed.
#include <atomic>
#include <dlfcn.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

static bool bad = false;

static void stage(const char *name, bool ok) {
  if (!ok) bad = true;
  char line[200];
  int n = std::snprintf(line, sizeof line, "%s: %s\n", name, ok ? "ok" : "BAD");
  ssize_t w = write(1, line, static_cast<size_t>(n));
  (void)w;
}

static std::atomic<int> thread_local_destroyed{0};
static std::mutex log_lock;
static std::vector<std::string> *exit_log;

struct PerThread {
  std::vector<std::string> words;
  std::map<int, std::unique_ptr<char[]>> blocks;
  int id = -1;
  ~PerThread() {
    if (id < 0) return; // never used on this thread
    bool ok = words.size() == 200 && words[199] == "word 199 of thread " + std::to_string(id);
    for (auto &b : blocks)
      if (b.second[0] != static_cast<char>(b.first)) ok = false;
    // Allocate at thread exit, into a global container another thread reads.
    std::lock_guard<std::mutex> g(log_lock);
    exit_log->push_back("thread " + std::to_string(id) + (ok ? " clean" : " corrupt"));
    thread_local_destroyed.fetch_add(1);
  }
};
static thread_local PerThread per_thread;

struct AtExit {
  std::vector<std::unique_ptr<std::string>> strings;
  ~AtExit() {
    bool ok = strings.size() == 1000;
    for (size_t i = 0; i < strings.size(); i++)
      if (*strings[i] != std::string(i % 50 + 1, 'x')) ok = false;
    strings.clear();
    strings.shrink_to_fit();
    stage("static object's destructor frees at process exit", ok);
  }
};
static AtExit at_exit;

struct alignas(64) Line {
  unsigned char bytes[64];
};
struct alignas(4096) Page {
  unsigned char bytes[4096];
};

int main() {
  exit_log = new std::vector<std::string>();

  // new/delete of every size class boundary, sized delete included.
  bool ok = true;
  for (size_t n = 1; n < (1u << 22); n = n * 2 + 3) {
    char *p = new char[n];
    std::memset(p, 7, n);
    if (p[n - 1] != 7) ok = false;
    delete[] p;
    int *q = new int(static_cast<int>(n));
    if (*q != static_cast<int>(n)) ok = false;
    delete q;
    void *r = ::operator new(n);
    ::operator delete(r, n);
  }
  stage("new/delete, new[]/delete[], sized delete", ok);

  // Over-aligned new: operator new(size_t, align_val_t).
  ok = true;
  for (int i = 0; i < 100; i++) {
    Line *l = new Line[static_cast<size_t>(i) + 1];
    Page *p = new Page;
    if (reinterpret_cast<uintptr_t>(l) % 64 != 0 || reinterpret_cast<uintptr_t>(p) % 4096 != 0) ok = false;
    std::memset(p->bytes, i, sizeof p->bytes);
    delete[] l;
    delete p;
    void *big = ::operator new(300000, std::align_val_t(1 << 20));
    if (reinterpret_cast<uintptr_t>(big) % (1 << 20) != 0) ok = false;
    ::operator delete(big, 300000, std::align_val_t(1 << 20));
  }
  stage("over-aligned new (64, 4096, 1 MiB)", ok);

  // nothrow new of an impossible size returns null; throwing new throws bad_alloc.
  volatile size_t impossible = static_cast<size_t>(-1) / 2; // volatile: not folded at compile time
  char *none = new (std::nothrow) char[impossible];
  // The throwing new is libstdc++'s unless the preloaded library replaces operator new itself
  // (mimalloc does, and its C replacement aborts instead of throwing): checked only in the first case.
  bool threw = false;
  Dl_info info;
  void *op_new = dlsym(RTLD_DEFAULT, "_Znwm");
  if (op_new != nullptr && dladdr(op_new, &info) != 0 && std::strstr(info.dli_fname, "libstdc++") != nullptr) {
    try {
      std::vector<char> v;
      v.reserve(static_cast<size_t>(1) << 62);
    } catch (const std::bad_alloc &) {
      threw = true;
    }
  } else {
    std::printf("note: operator new comes from %s: bad_alloc not checked\n", op_new ? info.dli_fname : "(absent)");
    std::fflush(stdout);
    threw = true;
  }
  stage("impossible sizes: nothrow null, bad_alloc thrown", none == nullptr && threw);

  // Exceptions in many threads (the runtime mallocs each exception object).
  std::atomic<int> caught{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; t++) {
    threads.emplace_back([t, &caught] {
      per_thread.id = t;
      for (int i = 0; i < 200; i++) per_thread.words.push_back("word " + std::to_string(i) + " of thread " + std::to_string(t));
      for (int i = 1; i < 40; i++) {
        per_thread.blocks[i] = std::unique_ptr<char[]>(new char[static_cast<size_t>(i) * 1000]);
        per_thread.blocks[i][0] = static_cast<char>(i);
      }
      for (int i = 0; i < 300; i++) {
        try {
          throw std::runtime_error(std::string(static_cast<size_t>(i % 90), 'e'));
        } catch (const std::runtime_error &e) {
          if (std::strlen(e.what()) == static_cast<size_t>(i % 90)) caught.fetch_add(1);
        }
      }
    });
  }
  for (auto &th : threads) th.join();
  stage("exceptions thrown and caught in 8 threads", caught.load() == 8 * 300);
  ok = thread_local_destroyed.load() == 8 && exit_log->size() == 8;
  for (auto &line : *exit_log)
    if (line.find(" clean") == std::string::npos) ok = false;
  stage("thread_local destructors free and allocate at thread exit", ok);
  delete exit_log;
  exit_log = new std::vector<std::string>(); // the main thread's own thread_local is never used

  for (size_t i = 0; i < 1000; i++) at_exit.strings.push_back(std::make_unique<std::string>(i % 50 + 1, 'x'));
  stage("main returns", !bad);
  return bad ? 1 : 0;
}
