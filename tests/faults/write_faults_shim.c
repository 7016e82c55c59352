/* LD_PRELOAD shim for tests: faults in this process's writes to regular files
 * through write(), pwrite() and copy_file_range() (the calls optstate writes
 * outputs with; pwrite where several processes write one file), leaving the other processes of a job, which share the directory,
 * alone (no small tmpfs can do that):
 *   OPTSTATE_TEST_FULL_AFTER=N    ENOSPC once N bytes are written, as if the
 *                                 filesystem filled up;
 *   OPTSTATE_TEST_FIRST_WRITE_DELAY_MS=N  the first write waits N ms, so that
 *                                 a test can act while this process is known
 *                                 to be writing (before it says it is done).
 * Standard streams (fds 0-2) are exempt so errors can still be reported.
 * Build: cc -shared -fPIC -o write_faults_shim.so write_faults_shim.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static long long remaining = -2; /* -2: not read yet; -1: no limit */

/* Takes n bytes from the budget; 1 (errno ENOSPC) when they do not fit. */
static int full(int fd, size_t n) {
  struct stat st;
  if (fd <= 2 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  static int delayed = 0;
  if (!__atomic_exchange_n(&delayed, 1, __ATOMIC_RELAXED)) {
    const char* delay = getenv("OPTSTATE_TEST_FIRST_WRITE_DELAY_MS");
    long ms = delay ? atol(delay) : 0;
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    if (ms > 0) nanosleep(&pause, NULL);
  }
  if (__atomic_load_n(&remaining, __ATOMIC_RELAXED) == -2) {
    const char* limit = getenv("OPTSTATE_TEST_FULL_AFTER");
    __atomic_store_n(&remaining, limit ? atoll(limit) : -1, __ATOMIC_RELAXED);
  }
  long long left = __atomic_load_n(&remaining, __ATOMIC_RELAXED);
  if (left < 0) return 0;
  if ((long long)n > left) {
    errno = ENOSPC;
    return 1;
  }
  __atomic_sub_fetch(&remaining, (long long)n, __ATOMIC_RELAXED);
  return 0;
}

ssize_t write(int fd, const void* buf, size_t n) {
  static ssize_t (*real)(int, const void*, size_t);
  if (!real) real = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  if (full(fd, n)) return -1;
  return real(fd, buf, n);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t at) {
  static ssize_t (*real)(int, const void*, size_t, off_t);
  if (!real) real = (ssize_t(*)(int, const void*, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
  if (full(fd, n)) return -1;
  return real(fd, buf, n, at);
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off_t at) { return pwrite(fd, buf, n, at); }

ssize_t copy_file_range(int in, off_t* in_off, int out, off_t* out_off, size_t n, unsigned flags) {
  static ssize_t (*real)(int, off_t*, int, off_t*, size_t, unsigned);
  if (!real) real = (ssize_t(*)(int, off_t*, int, off_t*, size_t, unsigned))dlsym(RTLD_NEXT, "copy_file_range");
  if (full(out, n)) return -1;
  return real(in, in_off, out, out_off, n, flags);
}
