// A larson-style exchange in C++ with sized delete, written for poolalloc's programs benchmark from
// the description of the pattern (a server's threads each replacing random objects of a shared
// working set, and handing their sets on, so that most frees are of objects another thread made).
//
//   larson THREADS ROUNDS OPS_PER_ROUND SLOTS
//
// Each thread owns a set of SLOTS objects of 16 to 1024 bytes. In a round it replaces OPS_PER_ROUND
// random objects of its set: `::operator delete(p, size)` of the old one (the sized form, as
// std::allocator frees), `::operator new(size)` of a new one. After each round the sets rotate
// among the threads (thread t takes the set thread t+1 used), so the next round frees objects
// that another thread allocated. Every object carries its size and seed in its bytes and is
// checked before it is freed. Prints a checksum that is the same under every allocator.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <pthread.h>
#include <thread>
#include <vector>

struct Object {
  unsigned char *p;
  size_t size;
};

static int threads, rounds, ops, slots;
static std::vector<std::vector<Object>> sets;
static pthread_barrier_t barrier;
static uint64_t checksums[64];
static uint64_t bad[64];

static uint64_t next(uint64_t &s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

static Object make(uint64_t &rng) {
  size_t size = 16 + next(rng) % 1009;
  unsigned char *p = static_cast<unsigned char *>(::operator new(size));
  p[0] = static_cast<unsigned char>(size);
  p[size - 1] = static_cast<unsigned char>(size >> 3);
  return Object{p, size};
}

static uint64_t retire(const Object &o, uint64_t *errors) {
  if (o.p[0] != static_cast<unsigned char>(o.size) ||
      o.p[o.size - 1] != static_cast<unsigned char>(o.size >> 3))
    ++*errors;
  ::operator delete(o.p, o.size);
  return o.size;
}

static void worker(int t) {
  uint64_t rng = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(t + 1);
  uint64_t sum = 0;
  for (int r = 0; r < rounds; r++) {
    std::vector<Object> &set = sets[static_cast<size_t>((t + r) % threads)];
    for (int i = 0; i < ops; i++) {
      Object &o = set[next(rng) % static_cast<uint64_t>(slots)];
      sum += retire(o, &bad[t]);
      o = make(rng);
    }
    pthread_barrier_wait(&barrier);
  }
  checksums[t] = sum;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: larson THREADS ROUNDS OPS_PER_ROUND SLOTS\n");
    return 2;
  }
  threads = std::atoi(argv[1]);
  rounds = std::atoi(argv[2]);
  ops = std::atoi(argv[3]);
  slots = std::atoi(argv[4]);
  if (threads < 1 || threads > 64 || rounds < 1 || ops < 1 || slots < 1) return 2;
  pthread_barrier_init(&barrier, nullptr, static_cast<unsigned>(threads));
  uint64_t rng = 12345;
  sets.resize(static_cast<size_t>(threads));
  for (auto &set : sets)
    for (int i = 0; i < slots; i++) set.push_back(make(rng));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; t++) pool.emplace_back(worker, t);
  for (auto &th : pool) th.join();
  uint64_t total = 0, errors = 0;
  for (int t = 0; t < threads; t++) {
    total += checksums[t];
    errors += bad[t];
  }
  for (auto &set : sets)
    for (auto &o : set) total += retire(o, &errors);
  // The report line goes through malloc and free as C code's would.
  char *line = nullptr;
  if (asprintf(&line, "larson: %d threads, %d rounds of %d replacements: %llu bytes freed, %llu bad\n",
               threads, rounds, ops, static_cast<unsigned long long>(total),
               static_cast<unsigned long long>(errors)) < 0)
    return 3;
  std::fputs(line, stdout);
  std::free(line);
  return errors == 0 ? 0 : 1;
}
