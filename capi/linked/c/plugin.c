/* A shared library the linked test (capi/linked) loads with dlopen after start: its malloc and free
 * bind to the executable's (poolalloc's) when the executable exports them. */
#include <stdlib.h>
#include <string.h>

void *plugin_alloc(size_t n) {
    void *p = malloc(n);
    if (p) memset(p, 0x5a, n);
    return p;
}
void plugin_free(void *p) { free(p); }
/* The address malloc resolves to inside this library. */
void *plugin_malloc_address(void) { return (void *)&malloc; }
