// One parse entry point of optstate per file. Built two ways:
//   with clang -fsanitize=fuzzer (tests/fuzz/run.sh)  LLVMFuzzerTestOneInput
//   in the normal build (-DOPTSTATE_FUZZ_REPLAY)       registered by name, so one
//       replay binary runs every corpus in testdata/fuzz/ as an ordinary test.
// A target returns 0 for every input; a broken invariant calls FuzzCheckFailed,
// which aborts (the fuzzer saves the input, the replay test fails).
#ifndef OPTSTATE_TESTS_FUZZ_FUZZ_TARGET_H_
#define OPTSTATE_TESTS_FUZZ_FUZZ_TARGET_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "io/byte_cursor.h"

namespace optstate::fuzz {

using TargetFn = int (*)(const uint8_t*, size_t);
bool Register(const char* name, TargetFn fn);

[[noreturn]] inline void FuzzCheckFailed(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::abort();
}

inline ByteSpan Bytes(const uint8_t* data, size_t size) {
  return ByteSpan(reinterpret_cast<const std::byte*>(data), size);
}

}  // namespace optstate::fuzz

#ifdef OPTSTATE_FUZZ_REPLAY
#define OPTSTATE_FUZZ_TARGET(name)                                                                       \
  static int name##_one_input(const uint8_t* data, size_t size);                                         \
  [[maybe_unused]] static const bool name##_registered = ::optstate::fuzz::Register(#name, name##_one_input); \
  static int name##_one_input(const uint8_t* data, size_t size)
#else
#define OPTSTATE_FUZZ_TARGET(name) extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
#endif

#endif  // OPTSTATE_TESTS_FUZZ_FUZZ_TARGET_H_
