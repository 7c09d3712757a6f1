/* fork() in a process whose other threads run, then a thread started in the child (as an allocator
   starts its background purger when first needed there). No allocator under test involved: natively
   it passes; qemu-user 7.2 aborts in the child with "qemu_plugin_vcpu_init_hook: assertion failed"
   and "cpu_exec: assertion failed: (cpu == current_cpu)". Exit 0 if every child ended well. */
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
static volatile int stop;
static void *spin(void *a) { while (!stop) { } return a; }
static void *nothing(void *a) { return a; }
int main(void) {
  pthread_t t[3];
  for (int i = 0; i < 3; i++) pthread_create(&t[i], 0, spin, 0);
  for (int r = 0; r < 10; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      pthread_t c;
      int ok = pthread_create(&c, 0, nothing, 0) == 0 && pthread_join(c, 0) == 0;
      _exit(ok ? 0 : 1);
    }
    int st; waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) { printf("round %d: child status %#x\n", r, st); return 1; }
  }
  stop = 1;
  for (int i = 0; i < 3; i++) pthread_join(t[i], 0);
  puts("10 forks, each child started a thread: ok");
  return 0;
}
