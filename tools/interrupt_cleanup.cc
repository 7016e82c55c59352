#include "interrupt_cleanup.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "optstate/file_io.h"

namespace optstate::tools {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Set while a distributed job wants to be told; read by the handler.
std::atomic<bool> telling{false};
int wake_pipe[2] = {-1, -1};  // handler -> helper thread: the signal number

std::mutex hook_mutex;
std::function<void(int)> hook;  // guarded by hook_mutex

[[noreturn]] void CleanUpAndEnd(int sig) {
  RemoveTemporaryOutputs();
  const char note[] = "\noptstate: interrupted; nothing was written (temporary outputs removed)\n";
  (void)!::write(STDERR_FILENO, note, sizeof note - 1);
  std::signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);  // the helper thread blocks it
  std::raise(sig);
  ::_exit(128 + sig);  // not reached: the default action ends the process
}

void OnInterrupt(int sig) {
  if (!telling.load()) CleanUpAndEnd(sig);
  // Telling the others needs the network, which a handler may not use: wake the
  // helper thread, and hold this thread still until the helper ends the process.
  char c = static_cast<char>(sig);
  (void)!::write(wake_pipe[1], &c, 1);
  for (;;) ::pause();
}

// Waits for a signal number from the handler, runs the hook for at most 3 s
// (a store that is unreachable must not keep the process alive), then ends it.
void HelperThread() {
  char c = 0;
  while (::read(wake_pipe[0], &c, 1) != 1) {
  }
  int sig = static_cast<unsigned char>(c);
  auto done = std::make_shared<std::pair<std::mutex, std::condition_variable>>();
  auto finished = std::make_shared<bool>(false);
  std::thread([sig, done, finished] {
    {
      std::lock_guard<std::mutex> lock(hook_mutex);
      if (hook) hook(sig);
    }
    std::lock_guard<std::mutex> lock(done->first);
    *finished = true;
    done->second.notify_one();
  }).detach();
  {
    std::unique_lock<std::mutex> lock(done->first);
    done->second.wait_for(lock, std::chrono::seconds(3), [&] { return *finished; });
  }
  CleanUpAndEnd(sig);
}

// Decimal digits of `v` into `out` (async-signal-safe); returns the length.
size_t FormatUnsigned(uint64_t v, char* out) {
  char digits[24];
  size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (size_t i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  return n;
}

void Say(const char* text) { (void)!::write(STDERR_FILENO, text, std::strlen(text)); }

// A read of a mapped file whose page is gone: the file was truncated or
// replaced while we read it. Named, outputs removed, exit 2, as for any input
// that cannot be read. A SIGBUS anywhere else keeps its default action.
void OnBusError(int sig, siginfo_t* info, void*) {
  const char* path = nullptr;
  uint64_t offset = 0;
  if (info == nullptr || !FindMappedRange(info->si_addr, &path, &offset)) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  // Several threads may fault at once (the value scan reads in parallel): one
  // reports and ends the process, the others wait for it to.
  static std::atomic<bool> reporting{false};
  if (reporting.exchange(true)) {
    for (;;) ::pause();
  }
  RemoveTemporaryOutputs();
  char number[24];
  number[FormatUnsigned(offset, number)] = '\0';
  Say("optstate: error: truncated input: ");
  Say(path);
  Say(": the file changed while it was read (truncated or replaced): no data at byte offset ");
  Say(number);
  Say(". Nothing was written (temporary outputs removed).\n");
  ::_exit(2);
}

}  // namespace

void RemoveOutputsOnInterrupt() {
  for (int sig : kSignals) std::signal(sig, OnInterrupt);
  ExitCleanlyOnTruncatedInput();
}

void ExitCleanlyOnTruncatedInput() {
  struct sigaction action {};
  action.sa_sigaction = OnBusError;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGBUS, &action, nullptr);
}

void TellOthersOnInterrupt(std::function<void(int signal)> tell_others) {
  static std::once_flag started;
  bool on = static_cast<bool>(tell_others);
  if (on) {
    std::call_once(started, [] {
      if (::pipe(wake_pipe) != 0) return;
      // The helper must never be the thread a signal lands on: it would then
      // hold itself still in the handler and nobody would end the process.
      sigset_t block, old;
      sigemptyset(&block);
      for (int sig : kSignals) sigaddset(&block, sig);
      pthread_sigmask(SIG_BLOCK, &block, &old);
      std::thread(HelperThread).detach();
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
    });
    if (wake_pipe[1] < 0) return;  // no pipe: plain cleanup, the others time out
  }
  std::lock_guard<std::mutex> lock(hook_mutex);
  hook = std::move(tell_others);
  telling.store(on);
}

}  // namespace optstate::tools
