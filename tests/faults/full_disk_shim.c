/* LD_PRELOAD shim for tests: this process's writes to regular files fail with
 * ENOSPC once OPTSTATE_TEST_FULL_AFTER bytes have gone through write() and
 * copy_file_range() (the two calls optstate writes outputs with), as if its
 * filesystem filled up. Other processes of the same job, sharing the
 * directory, are not affected, which no small tmpfs can do. Standard streams
 * (fds 0-2) are exempt so the error can still be reported.
 * Build: cc -shared -fPIC -o full_disk_shim.so full_disk_shim.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static long long remaining = -2; /* -2: not read yet; -1: no limit */

/* Takes n bytes from the budget; 1 (errno ENOSPC) when they do not fit. */
static int full(int fd, size_t n) {
  struct stat st;
  if (fd <= 2 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
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

ssize_t copy_file_range(int in, off_t* in_off, int out, off_t* out_off, size_t n, unsigned flags) {
  static ssize_t (*real)(int, off_t*, int, off_t*, size_t, unsigned);
  if (!real) real = (ssize_t(*)(int, off_t*, int, off_t*, size_t, unsigned))dlsym(RTLD_NEXT, "copy_file_range");
  if (full(out, n)) return -1;
  return real(in, in_off, out, out_off, n, flags);
}
