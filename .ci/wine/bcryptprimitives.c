/* bcryptprimitives.dll for wine 8, which lacks it: Rust's std (1.78 and later) imports ProcessPrng
 * from it for its random numbers (HashMap keys). ProcessPrng is implemented here over RtlGenRandom
 * (advapi32's SystemFunction036), which wine has. Built with mingw by .ci/targets and copied into the
 * wine prefix's system32; only for running the test suite under wine, never shipped.
 *
 *   x86_64-w64-mingw32-gcc -shared -O2 -o bcryptprimitives.dll bcryptprimitives.c \
 *       bcryptprimitives.def -ladvapi32
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    /* RtlGenRandom takes a ULONG length: fill in pieces of at most 1 GiB. */
    while (len > 0) {
        ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(data, n)) return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
