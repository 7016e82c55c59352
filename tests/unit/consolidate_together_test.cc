// consolidate with several processes writing one file (--distributed), played
// by two threads: the same bytes as one process, nothing left when a process
// fails before the commit, and the commit stands when only its word is lost.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "fixtures.h"
#include "io/job_steps.h"
#include "optstate/dcp.h"
#include "thread_coordinator.h"

namespace optstate {
namespace {

namespace fs = std::filesystem;

const char kSource[] = "testdata/good/torch26/fsdp2_dcp";

std::string Scratch(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/consolidate_together_test_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

ConsolidateOptions Unsynced() {
  ConsolidateOptions o;
  o.write.durability = Durability::kUnsynced;
  return o;
}

// What one process writes at DIR/out.pt.
std::string Alone(const std::string& dir, ConsolidateKeys keys) {
  auto dcp = OpenDcpCheckpoint(testing::RepoPath(kSource));
  EXPECT_TRUE(dcp.ok());
  ConsolidateOptions o = Unsynced();
  o.keys = keys;
  auto report = ConsolidateDcp(**dcp, dir + "/out.pt", o);
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  return testing::FileContents(dir + "/out.pt");
}

struct TwoReports {
  StatusOr<ConsolidateReport> rank0 = InternalError("not run"), rank1 = InternalError("not run");
  // Each rank's progress calls, (done, total).
  std::vector<std::pair<uint64_t, uint64_t>> progress[2];
};

// Both ranks consolidate the fixture into DIR/out.pt.
TwoReports Together(TwoThreadJob& job, const std::string& dir, ConsolidateKeys keys = ConsolidateKeys::kFqn) {
  TwoReports out;
  auto run = [&](int rank) {
    ThreadCoordinator co(job, rank);
    auto dcp = OpenDcpCheckpoint(testing::RepoPath(kSource));
    if (!dcp.ok()) return StatusOr<ConsolidateReport>(dcp.status());
    ConsolidateOptions o = Unsynced();
    o.keys = keys;
    o.coordinator = &co;
    o.progress = [&out, rank](uint64_t done, uint64_t total) { out.progress[rank].emplace_back(done, total); };
    return ConsolidateDcp(**dcp, dir + "/out.pt", o);
  };
  std::thread rank1([&] { out.rank1 = run(1); });
  out.rank0 = run(0);
  rank1.join();
  return out;
}

TEST(ConsolidateTogetherTest, TwoProcessesWriteTheBytesOneWrites) {
  for (ConsolidateKeys keys : {ConsolidateKeys::kFqn, ConsolidateKeys::kIndex}) {
    const std::string one = Scratch("one"), two = Scratch("two");
    const std::string expected = Alone(one, keys);
    ASSERT_GT(expected.size(), 10000u);
    TwoThreadJob job;
    TwoReports r = Together(job, two, keys);
    ASSERT_TRUE(r.rank0.ok()) << r.rank0.status().ToString();
    ASSERT_TRUE(r.rank1.ok()) << r.rank1.status().ToString();
    EXPECT_EQ(r.rank0->write.bytes, expected.size());
    EXPECT_EQ(r.rank1->write.bytes, expected.size());
    EXPECT_EQ(r.rank0->unconfirmed, "");
    EXPECT_TRUE(testing::FileContents(two + "/out.pt") == expected) << "the bytes differ from one process's";
    EXPECT_EQ(std::distance(fs::directory_iterator(two), fs::directory_iterator()), 1);  // no temporary left
  }
}

// Each process's progress runs to its own share, not to the whole file's
// bytes (which only the sum of the shares reaches).
TEST(ConsolidateTogetherTest, EachProcessCountsItsOwnShare) {
  auto dcp = OpenDcpCheckpoint(testing::RepoPath(kSource));
  ASSERT_TRUE(dcp.ok());
  auto alone = ConsolidateDcp(**dcp, Scratch("progress_one") + "/out.pt", Unsynced());
  ASSERT_TRUE(alone.ok());
  TwoThreadJob job;
  TwoReports r = Together(job, Scratch("progress_two"));
  ASSERT_TRUE(r.rank0.ok() && r.rank1.ok());
  uint64_t shares = 0;
  for (const auto& calls : r.progress) {
    ASSERT_FALSE(calls.empty());
    EXPECT_EQ(calls.back().first, calls.back().second);
    EXPECT_LT(calls.back().second, alone->tensor_bytes);
    shares += calls.back().second;
  }
  EXPECT_EQ(shares, alone->tensor_bytes);
}

// A process whose share failed fails the job: nothing appears, and an older
// file at the path stays as it was.
TEST(ConsolidateTogetherTest, AFailedShareLeavesNothing) {
  const std::string dir = Scratch("failed");
  { std::ofstream(dir + "/out.pt") << "older"; }
  TwoThreadJob job;
  job.fails_at = "written";
  TwoReports r = Together(job, dir);
  ASSERT_FALSE(r.rank0.ok());
  EXPECT_EQ(r.rank0.status().ToString(), "I/O error: process 1 of 2 failed: I/O error: disk full");
  ASSERT_FALSE(r.rank1.ok());
  EXPECT_EQ(testing::FileContents(dir + "/out.pt"), "older");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

// Process 0 published the file and its word was lost: process 1 finds at the
// path the very file it wrote into, and succeeds saying so.
TEST(ConsolidateTogetherTest, ARankThatMissedTheCommitFindsTheFileItWrote) {
  const std::string one = Scratch("one_missed"), dir = Scratch("missed");
  const std::string expected = Alone(one, ConsolidateKeys::kFqn);
  TwoThreadJob job;
  job.deaf_at = "done";
  TwoReports r = Together(job, dir);
  ASSERT_TRUE(r.rank0.ok()) << r.rank0.status().ToString();
  ASSERT_TRUE(r.rank1.ok()) << r.rank1.status().ToString();
  EXPECT_EQ(r.rank1->unconfirmed, "process 0 did not confirm the commit (I/O error: no word from process 0 of 2); " +
                                      dir + "/out.pt is the file this process wrote into, so it committed");
  EXPECT_EQ(r.rank1->write.bytes, expected.size());
  EXPECT_TRUE(testing::FileContents(dir + "/out.pt") == expected);
}

// A temporary left by a killed job: the next job refuses, saying what to do.
TEST(ConsolidateTogetherTest, ALeftoverTemporaryIsRefused) {
  const std::string dir = Scratch("leftover");
  { std::ofstream(dir + "/.out.pt.partial") << "half"; }
  TwoThreadJob job;
  TwoReports r = Together(job, dir);
  ASSERT_FALSE(r.rank0.ok());
  EXPECT_EQ(r.rank0.status().ToString(), "invalid argument: " + dir +
                                             "/.out.pt.partial: exists: another run is writing " + dir +
                                             "/out.pt, or one was interrupted (then remove it)");
  ASSERT_FALSE(r.rank1.ok());
  EXPECT_EQ(testing::FileContents(dir + "/.out.pt.partial"), "half");
  EXPECT_FALSE(fs::exists(dir + "/out.pt"));
}

// One process writing the output a job is writing (or a killed job left)
// would race it for the name: it refuses the same way.
TEST(ConsolidateTogetherTest, OneProcessRefusesAnOutputAJobIsWriting) {
  const std::string dir = Scratch("busy");
  { std::ofstream(dir + "/.out.pt.partial") << "half"; }
  auto dcp = OpenDcpCheckpoint(testing::RepoPath(kSource));
  ASSERT_TRUE(dcp.ok());
  auto report = ConsolidateDcp(**dcp, dir + "/out.pt", Unsynced());
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().ToString(), "invalid argument: " + dir +
                                            "/.out.pt.partial: exists: another run is writing " + dir +
                                            "/out.pt, or one was interrupted (then remove it)");
  EXPECT_EQ(testing::FileContents(dir + "/.out.pt.partial"), "half");
  EXPECT_FALSE(fs::exists(dir + "/out.pt"));
}

// Process 0's last word is the size it wrote; anything else is refused by name,
// never read as a partial number (what from_chars would do unchecked).
TEST(JobStepsTest, SizeFromProcessZeroTakesOnlyANumber) {
  EXPECT_EQ(*SizeFromProcessZero({"4096", "0"}, "out.pt"), 4096u);
  for (std::string sent : {"", "12x", "-1", " 7", "99999999999999999999"}) {
    StatusOr<uint64_t> got = SizeFromProcessZero({sent}, "out.pt");
    ASSERT_FALSE(got.ok()) << sent;
    EXPECT_EQ(got.status().ToString(), "internal error: out.pt: process 0 sent '" + sent + "' for its size");
  }
  EXPECT_FALSE(SizeFromProcessZero({}, "out.pt").ok());
}

}  // namespace
}  // namespace optstate
