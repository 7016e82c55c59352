// An input truncated while it is mapped (a trainer still writing it, a file
// rotated away) must end the run with a named error and exit 2, not SIGBUS
// (issue 20, item 5). Death tests: each case runs in a child process.
#include <gtest/gtest.h>

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "interrupt_cleanup.h"
#include "optstate/file_io.h"
#include "io/mapped_ranges.h"

namespace optstate {
namespace {

std::string ThreePageFile(const std::string& name) {
  std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path, std::ios::binary) << std::string(3 * 4096, 'x');
  return path;
}

TEST(MappedRangesTest, ALiveMappingIsFoundAndAClosedOneIsNot) {
  std::string path = ThreePageFile("optstate-mapped-ranges-test");
  const void* inside = nullptr;
  {
    auto f = MappedFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    inside = f->bytes().data() + 5000;
    const char* found = nullptr;
    uint64_t offset = 0;
    ASSERT_TRUE(FindMappedRange(inside, &found, &offset));
    EXPECT_EQ(std::string(found), path);
    EXPECT_EQ(offset, 5000u);
    EXPECT_FALSE(FindMappedRange(f->bytes().data() + f->size(), &found, &offset));  // one past the end
  }
  const char* found = nullptr;
  uint64_t offset = 0;
  EXPECT_FALSE(FindMappedRange(inside, &found, &offset));
  std::filesystem::remove(path);
}

// Copying a mapped input's bytes with write(2) after its pages vanished fails
// with EFAULT, not a signal: named as the input's truncation, not a bad output.
TEST(MappedRangesTest, WritingBytesOfATruncatedMappingNamesTheInput) {
  std::string path = ThreePageFile("optstate-truncated-copy-test");
  std::string out = (std::filesystem::temp_directory_path() / "optstate-truncated-copy-out").string();
  auto f = MappedFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  auto writer = AtomicFileWriter::Create(out);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  Status s = (*writer)->Write(f->bytes().subspan(2 * 4096, 100));
  EXPECT_EQ(s.ToString(), "truncated input: " + path + ": the file changed while it was read (truncated or replaced): no "
                          "data at byte offset 8192 (copying it to " + out + ")");
  writer->reset();
  EXPECT_FALSE(std::filesystem::exists(out));
  std::filesystem::remove(path);
}

#if defined(__SANITIZE_ADDRESS__)
#define OPTSTATE_UNDER_ASAN 1
#else
#define OPTSTATE_UNDER_ASAN 0
#endif

TEST(TruncatedInputDeathTest, ReadingAPageTheFileLostExitsTwoNamingFileAndOffset) {
  if (OPTSTATE_UNDER_ASAN) GTEST_SKIP() << "AddressSanitizer installs its own SIGBUS handler";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::string path = ThreePageFile("optstate-truncated-input-test");
  EXPECT_EXIT(
      {
        tools::ExitCleanlyOnTruncatedInput();
        auto f = MappedFile::Open(path);
        if (!f.ok() || ::truncate(path.c_str(), 4096) != 0) std::exit(3);
        volatile std::byte b = f->bytes()[2 * 4096 + 7];  // the third page is gone
        (void)b;
        std::exit(0);
      },
      ::testing::ExitedWithCode(2),
      "optstate: error: truncated input: .*optstate-truncated-input-test: the file changed while it was read \\(truncated "
      "or replaced\\): no data at byte offset 8199\\. Nothing was written");
  std::filesystem::remove(path);
}

TEST(TruncatedInputDeathTest, ABusErrorOutsideAnyMappingKeepsItsDefault) {
  if (OPTSTATE_UNDER_ASAN) GTEST_SKIP() << "AddressSanitizer installs its own SIGBUS handler";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        tools::ExitCleanlyOnTruncatedInput();
        std::raise(SIGBUS);
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

}  // namespace
}  // namespace optstate
