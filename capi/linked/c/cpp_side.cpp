// The C++ part of the linked test (capi/linked): operator new and delete, which the executable's
// own definitions (poolalloc_c's) serve, as they serve the C side's malloc.
#include <cstddef>
#include <new>
#include <string>

extern "C" void *cpp_new(std::size_t n) { return new char[n]; }
extern "C" void cpp_delete(void *p) { delete[] static_cast<char *>(p); }
extern "C" void *cpp_new_aligned(std::size_t n) { return ::operator new(n, std::align_val_t(128)); }
extern "C" void cpp_delete_aligned(void *p) { ::operator delete(p, std::align_val_t(128)); }
// A std::string long enough to leave its inline buffer: its block comes from operator new.
extern "C" void *cpp_string(std::size_t n) { return new std::string(n, 'x'); }
extern "C" const void *cpp_string_data(void *s) { return static_cast<std::string *>(s)->data(); }
extern "C" void cpp_string_delete(void *s) { delete static_cast<std::string *>(s); }
