#include "optstate/file_io.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fixtures.h"
#include "io/staging_directory.h"

namespace optstate {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "optstate-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  size_t Count() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(path_), fs::directory_iterator()));
  }

 private:
  std::string path_;
};

// Whether `dir`'s filesystem makes O_TMPFILE files (ext4, xfs, btrfs and
// tmpfs do; overlayfs before Linux 6.6 does not).
bool UnnamedFilesWork(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY, 0600);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(MappedFileTest, MapsWholeFileReadOnly) {
  std::string path = testing::RepoPath("testdata/good/torch113/adamw_index.pt");
  StatusOr<MappedFile> f = MappedFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->size(), fs::file_size(path));
  EXPECT_EQ(AsChars(f->bytes()).substr(0, 4), "PK\x03\x04");
  MappedFile moved = std::move(*f);
  EXPECT_EQ(moved.size(), fs::file_size(path));
}

// Resident KiB of the mapping that starts at `addr`, from /proc/self/smaps.
long MappingRssKib(const void* addr) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  char start[32];
  std::snprintf(start, sizeof start, "%lx-", reinterpret_cast<unsigned long>(addr));
  bool in = false;
  while (std::getline(smaps, line)) {
    if (line.find('-') != std::string::npos && line.find(' ') > line.find('-') && isxdigit(line[0])) {
      in = line.starts_with(start);
    } else if (in && line.starts_with("Rss:")) {
      return std::stol(line.substr(4));
    }
  }
  return -1;
}

// A partial page at either side of the range is dropped too, the margin is
// clamped to the mapping, and every byte reads back the same afterwards.
TEST(MappedFileTest, ReleasePagesAroundUnmapsPartialPagesAndMargin) {
  TempDir dir;
  const std::string path = dir / "f";
  std::string content(8u << 20, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 31 + 7);
  std::ofstream(path, std::ios::binary) << content;
  StatusOr<MappedFile> f = MappedFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  uint64_t sum = 0;
  for (std::byte b : f->bytes()) sum += static_cast<uint8_t>(b);  // every page resident
  ASSERT_GE(MappingRssKib(f->bytes().data()), 8 * 1024);
  // 30 bytes in the middle, 2 MiB either side: 4 MiB and the page holding them.
  f->ReleasePagesAround(f->bytes().subspan(4u << 20, 30), 2u << 20);
  long rss = MappingRssKib(f->bytes().data());
  EXPECT_LE(rss, 4 * 1024 + 4) << "KiB resident after dropping 4 MiB of 8";
  // Near the end: the margin stops at the mapping's last page.
  f->ReleasePagesAround(f->bytes().last(10), 2u << 20);
  f->ReleasePagesAround(f->bytes().first(0), 2u << 20);
  EXPECT_LE(MappingRssKib(f->bytes().data()), 4);
  uint64_t again = 0;
  for (std::byte b : f->bytes()) again += static_cast<uint8_t>(b);
  EXPECT_EQ(again, sum);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->bytes().data()), content.size()), content);
}

TEST(MappedFileTest, MissingFileIsNotFoundWithPath) {
  StatusOr<MappedFile> f = MappedFile::Open("/nonexistent/x.pt");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(f.status().message(), "/nonexistent/x.pt: cannot open: No such file or directory");
}

TEST(MappedFileTest, DirectoryIsInvalidArgument) {
  TempDir dir;
  StatusOr<MappedFile> f = MappedFile::Open(dir / "");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
}

TEST(MappedFileTest, EmptyFileMapsToEmptySpan) {
  TempDir dir;
  std::ofstream(dir / "empty").close();
  StatusOr<MappedFile> f = MappedFile::Open(dir / "empty");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->size(), 0u);
  EXPECT_TRUE(f->bytes().empty());
}

TEST(AtomicFileWriterTest, CommitRenamesCompleteFile) {
  TempDir dir;
  auto w = AtomicFileWriter::Create(dir / "out.pt");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE((*w)->Write(AsBytes("hello ")).ok());
  ASSERT_TRUE((*w)->Write(AsBytes("world")).ok());
  EXPECT_FALSE(fs::exists(dir / "out.pt"));  // nothing at the final path before Commit
  // Nor anywhere else: the temporary has no name until Commit (O_TMPFILE).
  if (UnnamedFilesWork(dir / "")) {
    EXPECT_EQ(dir.Count(), 0u);
  }
  ASSERT_TRUE((*w)->Commit().ok());
  EXPECT_EQ(Slurp(dir / "out.pt"), "hello world");
  EXPECT_EQ(dir.Count(), 1u);
  EXPECT_EQ((*w)->bytes_written(), 11u);
  struct stat st {};
  ASSERT_EQ(::stat((dir / "out.pt").c_str(), &st), 0);
  EXPECT_NE(st.st_mode & 0044, 0u);  // readable by others, unlike mkstemp's 0600
}

TEST(AtomicFileWriterTest, AbandonedWriterLeavesNothingAndKeepsOldFile) {
  TempDir dir;
  std::ofstream(dir / "out.pt") << "previous";
  {
    auto w = AtomicFileWriter::Create(dir / "out.pt");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Write(AsBytes("partial")).ok());
  }
  EXPECT_EQ(Slurp(dir / "out.pt"), "previous");
  EXPECT_EQ(dir.Count(), 1u);
}

TEST(AtomicFileWriterTest, CancellationFailsTheNextWriteAndLeavesTheOldFile) {
  TempDir dir;
  std::ofstream(dir / "out.pt") << "previous";
  auto w = AtomicFileWriter::Create(dir / "out.pt");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Write(AsBytes("first block")).ok());
  RequestCancellation();
  Status s = (*w)->Write(AsBytes("second block"));
  ClearCancellation();
  EXPECT_EQ(s.code(), StatusCode::kCancelled);
  EXPECT_EQ(s.message(), (dir / "out.pt") + ": cancelled; nothing written");
  EXPECT_FALSE((*w)->Commit().ok());  // the writer gave up its temporary
  EXPECT_EQ(Slurp(dir / "out.pt"), "previous");
  EXPECT_EQ(dir.Count(), 1u);
  auto next = AtomicFileWriter::Create(dir / "next.pt");  // cleared: the next job writes
  ASSERT_TRUE(next.ok());
  ASSERT_TRUE((*next)->Write(AsBytes("x")).ok());
  ASSERT_TRUE((*next)->Commit().ok());
}

// The kernel copies a range of the input; where it cannot (a pipe is no regular
// file), CopyFromFile says it copied nothing and the caller writes instead.
TEST(AtomicFileWriterTest, CopyFromFileAppendsTheRangeOrNothing) {
  TempDir dir;
  std::string input = testing::RepoPath("testdata/good/torch113/adamw_index.pt");
  StatusOr<MappedFile> in = MappedFile::Open(input);
  ASSERT_TRUE(in.ok());
  auto w = AtomicFileWriter::Create(dir / "out.bin", Durability::kUnsynced);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Write(AsBytes("head:")).ok());
  StatusOr<uint64_t> copied = (*w)->CopyFromFile(in->fd(), 100, 1000);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_EQ(*copied, 1000u);
  EXPECT_EQ((*w)->position(), 1005u);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  StatusOr<uint64_t> from_pipe = (*w)->CopyFromFile(pipe_fds[0], 0, 10);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  ASSERT_TRUE(from_pipe.ok()) << from_pipe.status().ToString();
  EXPECT_EQ(*from_pipe, 0u);
  ASSERT_TRUE((*w)->Write(AsBytes(":tail")).ok());
  ASSERT_TRUE((*w)->Commit().ok());
  EXPECT_EQ(Slurp(dir / "out.bin"), "head:" + std::string(AsChars(in->bytes()).substr(100, 1000)) + ":tail");
}

// SIGKILL (or the OOM killer) runs no cleanup code at all; an unnamed
// temporary disappears with the process anyway.
TEST(AtomicFileWriterTest, KilledWriterLeavesNothing) {
  TempDir dir;
  if (!UnnamedFilesWork(dir / "")) GTEST_SKIP() << "no O_TMPFILE on " << dir / "";
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto w = AtomicFileWriter::Create(dir / "out.pt");
    if (!w.ok() || !(*w)->Write(AsBytes("partial")).ok()) ::_exit(3);
    ::kill(::getpid(), SIGKILL);
    ::_exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exit " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_EQ(dir.Count(), 0u);
}

TEST(AtomicFileWriterTest, MissingDirectoryIsNotFound) {
  auto w = AtomicFileWriter::Create("/nonexistent-dir/out.pt");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(w.status().message(),
            "/nonexistent-dir/out.pt: cannot create a temporary file beside it: No such file or "
            "directory");
}

}  // namespace
}  // namespace optstate

namespace optstate {
namespace {

// The staging directory a job of several processes shares (or a killed one
// left) makes every other writer of that output refuse, one process or many,
// saying what to do; nothing is created or removed.
TEST(StagingDirectoryTest, SharedStagingLeftBehindStopsEveryWriter) {
  TempDir dir;
  fs::create_directory(dir / ".out.partial");
  const std::string said = (dir / ".out.partial") + ": exists: another run is writing " + (dir / "out") +
                           ", or one was interrupted (then remove it)";
  for (bool shared : {true, false}) {
    auto staging = StagingDirectory::Create(dir / "out", shared);
    ASSERT_FALSE(staging.ok());
    EXPECT_EQ(staging.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(staging.status().message(), said);
  }
  EXPECT_EQ(dir.Count(), 1u);
  fs::remove(dir / ".out.partial");
  auto alone = StagingDirectory::Create(dir / "out", /*shared=*/false);
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
}

}  // namespace
}  // namespace optstate
