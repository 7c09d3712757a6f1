/* process_vm_readv on the program's own memory (how poolalloc's os::copy_readable copies a block it
   may not be able to read whole): natively it copies; under qemu-user 7.2 the syscall is not
   emulated. Exit 0 if the 8 bytes were copied. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
int main(void) {
  char src[8] = {1, 2, 3, 4, 5, 6, 7, 8}, dst[8] = {0};
  struct iovec local = {dst, 8}, remote = {src, 8};
  errno = 0;
  ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  printf("process_vm_readv returned %zd (errno %d: %s), bytes %s\n", n, errno, strerror(errno),
         memcmp(src, dst, 8) ? "NOT copied" : "copied");
  return memcmp(src, dst, 8) != 0;
}
