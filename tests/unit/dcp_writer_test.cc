// Writing DCP checkpoints: torch.chunk's row split, .metadata that our reader
// reads back identically, reshard and export that consolidate to the same
// object, and a failed write that leaves nothing behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "fixtures.h"
#include "graph_compare.h"
#include "thread_coordinator.h"
#include "optstate/coordinator.h"
#include "optstate/dcp.h"

namespace optstate {
namespace {

namespace fs = std::filesystem;

std::string Scratch(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/dcp_writer_test_" + name;
  fs::remove_all(dir);
  return dir;
}

std::vector<std::pair<std::string, std::string>> Consolidated(const std::string& dir) {
  auto dcp = OpenDcpCheckpoint(dir);
  EXPECT_TRUE(dcp.ok()) << dcp.status().ToString();
  if (!dcp.ok()) return {};
  std::string out = Scratch(std::filesystem::path(dir).filename().string() + ".consolidated.pt");
  ConsolidateOptions options;
  options.read.verify_crc = true;  // every item's CRCs, combined or computed from parts, must hold
  auto report = ConsolidateDcp(**dcp, out, options);
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  auto file = OpenCheckpoint(out);
  EXPECT_TRUE(file.ok());
  if (!file.ok()) return {};
  return testing::FlattenValues(**file);
}

TEST(DcpWriterTest, RowsSplitAsTorchChunk) {
  using R = std::pair<int64_t, int64_t>;
  EXPECT_EQ(ChunkRows(10, 3, 0), R(0, 4));
  EXPECT_EQ(ChunkRows(10, 3, 1), R(4, 8));
  EXPECT_EQ(ChunkRows(10, 3, 2), R(8, 10));
  EXPECT_EQ(ChunkRows(1, 3, 0), R(0, 1));
  EXPECT_EQ(ChunkRows(1, 3, 1), R(1, 1));  // FSDP2: ranks past the rows hold none
  EXPECT_EQ(ChunkRows(1, 3, 2), R(1, 1));
  EXPECT_EQ(ChunkRows(3, 4, 3), R(3, 3));
  EXPECT_EQ(ChunkRows(0, 2, 0), R(0, 0));
}

// storage_data is indexed by (fqn, chunk offset): a key listed twice is
// refused, naming the second listing; the first tensor's chunks found.
TEST(DcpWriterTest, StorageDataKeyListedTwiceIsRefused) {
  auto dcp = OpenDcpCheckpoint(testing::RepoPath("testdata/good/torch26/fsdp2_3rank_dcp"));
  ASSERT_TRUE(dcp.ok());
  std::vector<DcpEntry> entries = (*dcp)->metadata().entries;
  auto tensor = std::find_if(entries.begin(), entries.end(), [](const DcpEntry& e) { return e.chunks.size() >= 2; });
  ASSERT_NE(tensor, entries.end());
  tensor->chunks[1].offsets = tensor->chunks[0].offsets;
  auto pickle = WriteDcpMetadata(entries);
  ASSERT_TRUE(pickle.ok()) << pickle.status().ToString();
  auto got = ParseDcpMetadata(AsBytes(*pickle));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(got.status().message().find(": storage_data lists '" + tensor->fqn + "' at the same offset twice"),
            std::string::npos)
      << got.status().ToString();
}

TEST(DcpWriterTest, MetadataReadsBackAsWritten) {
  auto dcp = OpenDcpCheckpoint(testing::RepoPath("testdata/good/torch26/fsdp2_3rank_dcp"));
  ASSERT_TRUE(dcp.ok());
  const std::vector<DcpEntry>& want = (*dcp)->metadata().entries;
  auto pickle = WriteDcpMetadata(want);
  ASSERT_TRUE(pickle.ok()) << pickle.status().ToString();
  // Streamed to a sink, the same bytes in order.
  std::string streamed;
  StatusOr<uint64_t> count = WriteDcpMetadata(want, [&](std::string_view piece) {
    streamed += piece;
    return Status();
  });
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  EXPECT_EQ(*count, pickle->size());
  EXPECT_EQ(streamed, *pickle);
  // A sink's error stops the writing and is returned.
  StatusOr<uint64_t> refused = WriteDcpMetadata(want, [](std::string_view) { return IoError("disk full"); });
  EXPECT_EQ(refused.status().ToString(), "I/O error: disk full");
  auto got = ParseDcpMetadata(AsBytes(*pickle));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->entries.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const DcpEntry& a = want[i];
    const DcpEntry& b = got->entries[i];
    EXPECT_EQ(a.fqn, b.fqn);
    EXPECT_EQ(DcpPathText(a.path), DcpPathText(b.path));
    EXPECT_EQ(a.is_tensor, b.is_tensor);
    EXPECT_EQ(a.dtype, b.dtype);
    EXPECT_EQ(a.size, b.size);
    ASSERT_EQ(a.chunks.size(), b.chunks.size()) << a.fqn;
    for (size_t c = 0; c < a.chunks.size(); ++c) {
      EXPECT_EQ(a.chunks[c].offsets, b.chunks[c].offsets);
      EXPECT_EQ(a.chunks[c].sizes, b.chunks[c].sizes);
      EXPECT_EQ(DcpLocationText(a.chunks[c].where), DcpLocationText(b.chunks[c].where));
    }
    EXPECT_EQ(DcpLocationText(a.bytes_where), DcpLocationText(b.bytes_where));
  }
  // Only DCP's own classes and helpers are named (the reader would refuse anything else).
  for (const GlobalRef& g : got->globals) {
    EXPECT_TRUE(g.module.starts_with("torch")) << g.module << "." << g.name;
  }
}

TEST(DcpWriterTest, ReshardAndExportConsolidateToTheSameObject) {
  const std::string source = testing::RepoPath("testdata/good/torch26/fsdp2_dcp");
  auto original = Consolidated(source);
  ASSERT_EQ(original.size(), 73u);
  auto dcp = OpenDcpCheckpoint(source);
  ASSERT_TRUE(dcp.ok());
  for (int world : {1, 3, 4, 11}) {
    SCOPED_TRACE(world);
    std::string out = Scratch("reshard" + std::to_string(world));
    DcpWriteOptions o;
    o.world_size = world;
    o.durability = Durability::kUnsynced;
    auto report = ReshardDcp(**dcp, out, o);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_EQ(report->file_bytes.size(), static_cast<size_t>(world));
    EXPECT_EQ(report->bytes_items, 11u);
    EXPECT_EQ(Consolidated(out), original);
  }
  // export of torch's own consolidated file, as DCP on 2 ranks.
  auto file = OpenCheckpoint(source + ".consolidated.pt");
  ASSERT_TRUE(file.ok());
  std::string out = Scratch("export2");
  DcpWriteOptions o;
  o.world_size = 2;
  auto report = ExportToDcp(**file, out, o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->tensors, 36u);
  EXPECT_EQ(Consolidated(out), original);
}

// A float32 tensor `fqn` of `rows` x 2 whose bytes are all 1.
DcpOutEntry OnesTensor(const std::string& fqn, int64_t rows) {
  DcpOutEntry e;
  e.fqn = fqn;
  e.path = {DcpPathPart{false, fqn, 0}};
  e.is_tensor = true;
  e.size = {rows, 2};
  e.rows = [](int64_t begin, int64_t end, std::byte* out) {
    std::fill(out, out + (end - begin) * 8, std::byte{1});
    return Status();
  };
  return e;
}

TEST(DcpWriterTest, FailedWriteLeavesNothing) {
  std::string parent = Scratch("failing");
  fs::create_directories(parent);
  std::vector<DcpOutEntry> entries{OnesTensor("a", 4), OnesTensor("b", 4)};
  entries[1].rows = [](int64_t begin, int64_t, std::byte*) {
    return begin >= 2 ? IoError("disk went away") : Status();
  };
  DcpWriteOptions o;
  o.world_size = 2;
  auto report = WriteDcp(entries, parent + "/out", o);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().ToString(), "I/O error: " + parent + "/out/__1_0.distcp: 'b': disk went away");
  EXPECT_TRUE(fs::is_empty(parent)) << "no output and no temporary directory left behind";
}

// A run killed outright (SIGKILL, the OOM killer) leaves its staging directory;
// the next write to that output lists it (and only it) and leaves it alone.
TEST(DcpWriterTest, LeftoverStagingDirectoriesAreReportedNotRemoved) {
  std::string parent = Scratch("leftovers");
  fs::create_directories(parent + "/.out.tmp-Ab12Cd/inner");
  fs::create_directories(parent + "/.out.tmp-toolong7");  // not mkdtemp's pattern
  fs::create_directories(parent + "/.other.tmp-Ab12Cd");  // another output's
  std::ofstream(parent + "/.out.tmp-File01") << "a file, not a staging directory";
  std::vector<DcpOutEntry> entries{OnesTensor("a", 2)};
  DcpWriteOptions o;
  o.durability = Durability::kUnsynced;
  auto report = WriteDcp(entries, parent + "/out", o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->leftovers, std::vector<std::string>{parent + "/.out.tmp-Ab12Cd"});
  EXPECT_TRUE(fs::exists(parent + "/.out.tmp-Ab12Cd/inner"));
  EXPECT_TRUE(fs::exists(parent + "/out/.metadata"));
}

// A job's coordinator whose exchange `lost_at` fails the way a process lost
// between exchanges makes it fail (the other processes are not simulated: this
// one does every rank's work).
class LosingCoordinator : public SoloCoordinator {
 public:
  explicit LosingCoordinator(std::string lost_at) : lost_at_(std::move(lost_at)) {}
  StatusOr<std::vector<std::string>> AllGather(const std::string& step, const std::string& mine) override {
    if (step == lost_at_) return IoError("process 1 of 2 stopped answering");
    return SoloCoordinator::AllGather(step, mine);
  }

 private:
  std::string lost_at_;
};

// WriteDcp of one tensor to PARENT/out with a process lost at `step`.
StatusOr<DcpWriteReport> WriteLosingAt(const std::string& step, const std::string& parent) {
  fs::create_directories(parent);
  LosingCoordinator co(step);
  DcpWriteOptions o;
  o.durability = Durability::kUnsynced;
  return WriteDcp({OnesTensor("a", 4)}, parent + "/out", o, &co);
}

// Lost before every part is written: nothing appears.
TEST(DcpWriterTest, ProcessLostBeforeTheLastWriteLeavesNothing) {
  std::string parent = Scratch("lost_written");
  auto report = WriteLosingAt("written", parent);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().ToString(), "I/O error: process 1 of 2 stopped answering");
  EXPECT_TRUE(fs::is_empty(parent));
}

// Lost once only the commit remains: rank 0 commits, the output is whole, and
// the report says who did not hear of it.
TEST(DcpWriterTest, ProcessLostAfterTheLastWriteStillCommits) {
  std::string parent = Scratch("lost_done");
  auto report = WriteLosingAt("done", parent);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->unconfirmed, "I/O error: process 1 of 2 stopped answering");
  EXPECT_GT(report->metadata_bytes, 0u);
  EXPECT_TRUE(fs::exists(parent + "/out/.metadata"));
  DcpWriteOptions o;
  o.durability = Durability::kUnsynced;
  ASSERT_TRUE(WriteDcp({OnesTensor("a", 4)}, parent + "/alone", o).ok());
  EXPECT_EQ(Consolidated(parent + "/out"), Consolidated(parent + "/alone"));
}

struct TwoReports {
  StatusOr<DcpWriteReport> rank0 = InternalError("not run"), rank1 = InternalError("not run");
};

// WriteDcp of one tensor to PARENT/out by two ranks, rank 1 deaf at `job.deaf_at`.
TwoReports WriteByTwoThreads(TwoThreadJob& job, const std::string& parent) {
  fs::create_directories(parent);
  DcpWriteOptions o;
  o.durability = Durability::kUnsynced;
  o.world_size = 2;
  TwoReports out;
  ThreadCoordinator co0(job, 0), co1(job, 1);
  std::thread rank1([&] { out.rank1 = WriteDcp({OnesTensor("a", 4)}, parent + "/out", o, &co1); });
  out.rank0 = WriteDcp({OnesTensor("a", 4)}, parent + "/out", o, &co0);
  rank1.join();
  return out;
}

// Rank 0 committed and its word was lost: rank 1 finds its own file in the
// output and succeeds, saying so, instead of failing a job whose output is whole.
TEST(DcpWriterTest, RankThatMissedTheCommitFindsItsFileInTheOutput) {
  std::string parent = Scratch("missed_done");
  TwoThreadJob job;
  job.deaf_at = "done";
  TwoReports r = WriteByTwoThreads(job, parent);
  ASSERT_TRUE(r.rank0.ok()) << r.rank0.status().ToString();
  EXPECT_EQ(r.rank0->unconfirmed, "");
  ASSERT_TRUE(r.rank1.ok()) << r.rank1.status().ToString();
  EXPECT_EQ(r.rank1->unconfirmed, "process 0 did not confirm the commit (I/O error: no word from process 0 of 2); " +
                                      parent + "/out holds .metadata and this process's files, so it committed");
  EXPECT_EQ(r.rank1->metadata_bytes, r.rank0->metadata_bytes);
  EXPECT_EQ(r.rank1->file_bytes, r.rank0->file_bytes);
}

// The same, but what now sits at the output is not the directory rank 1 wrote
// into (a copy: same names, other files): rank 1 cannot tell that its job
// committed, so it fails naming the fault.
TEST(DcpWriterTest, RankThatMissedTheCommitFailsWhenItsFileIsNotThere) {
  std::string parent = Scratch("missed_done_copy");
  TwoThreadJob job;
  job.deaf_at = "done";
  job.before_failing = [&] {
    fs::rename(parent + "/out", parent + "/moved");
    fs::copy(parent + "/moved", parent + "/out");
  };
  TwoReports r = WriteByTwoThreads(job, parent);
  ASSERT_TRUE(r.rank0.ok()) << r.rank0.status().ToString();
  EXPECT_TRUE(fs::exists(parent + "/out/.metadata"));
  ASSERT_FALSE(r.rank1.ok());
  EXPECT_EQ(r.rank1.status().ToString(), "I/O error: no word from process 0 of 2");
}

}  // namespace
}  // namespace optstate
