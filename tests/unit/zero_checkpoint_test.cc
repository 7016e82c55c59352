// DeepSpeed ZeRO directories that DeepSpeed 0.16.4 itself wrote
// (testdata/gen/gen_deepspeed_zero.py): every parameter's pieces placed where
// the run's layout put them, and each planted fault found with its exact words.
#include "optstate/zero.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <utility>

#include <gtest/gtest.h>

#include "fixtures.h"
#include "optstate/checkpoint.h"
#include "optstate/validate.h"
#include "thread_coordinator.h"

namespace optstate {
namespace {

using testing::RepoPath;

std::string Tag(const std::string& dir) {
  return RepoPath("testdata/frameworks/deepspeed_0.16.4/" + dir + "/global_step3");
}

std::unique_ptr<ZeroCheckpoint> Open(const std::string& dir) {
  auto z = OpenZeroCheckpoint(Tag(dir));
  EXPECT_TRUE(z.ok()) << z.status().ToString();
  return z.ok() ? std::move(*z) : nullptr;
}

const ZeroParam& Param(const ZeroCheckpoint& z, const std::string& name) {
  for (const ZeroParam& p : z.params) {
    if (p.name == name) return p;
  }
  static const ZeroParam none;
  ADD_FAILURE() << "no parameter " << name;
  return none;
}

// "rank@offset+numel->param_offset" for each fragment.
std::vector<std::string> Pieces(const ZeroParam& p) {
  std::vector<std::string> out;
  for (const ZeroFragment& f : p.fragments) {
    out.push_back(std::to_string(f.rank) + "@" + std::to_string(f.offset) + "+" + std::to_string(f.numel) + "->" +
                  std::to_string(f.param_offset));
  }
  return out;
}

std::vector<std::string> Problems(const ZeroCheckpoint& z) {
  std::vector<std::string> out;
  for (const ZeroLayoutProblem& p : z.problems) {
    out.push_back(p.kind + " " + std::filesystem::path(p.where).filename().string() + ": " + p.message);
  }
  return out;
}

TEST(ZeroCheckpointTest, Stage2GroupsCutAcrossRanksWithPaddingOnTheLast) {
  auto z = Open("zero2");
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(z->stage, 2);
  EXPECT_EQ(z->world_size, 2u);
  ASSERT_EQ(z->groups.size(), 2u);
  EXPECT_TRUE(z->ok()) << ::testing::PrintToString(Problems(*z));
  // Group 0 holds fc1.weight (48) and fc2.weight (24): 72 elements, 36 per rank.
  EXPECT_EQ(z->groups[0].partition_numel, (std::vector<uint64_t>{36, 36}));
  EXPECT_EQ(Pieces(Param(*z, "fc1.weight")), (std::vector<std::string>{"0@0+36->0", "1@0+12->36"}));
  EXPECT_EQ(Pieces(Param(*z, "fc2.weight")), (std::vector<std::string>{"1@12+24->0"}));
  // Group 1: 8 + 8 + 8 + 3 = 27 elements padded to 28; rank 1's fp32 file holds 13 of its 14.
  EXPECT_EQ(z->groups[1].partition_numel, (std::vector<uint64_t>{14, 14}));
  EXPECT_EQ(z->groups[1].padding, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(Pieces(Param(*z, "norm.weight")), (std::vector<std::string>{"0@8+6->0", "1@0+2->6"}));
  EXPECT_EQ(Pieces(Param(*z, "fc2.bias")), (std::vector<std::string>{"1@10+3->0"}));
  EXPECT_EQ(Param(*z, "emb.weight").group, -1);
  EXPECT_EQ(z->groups[0].state_fields, (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
  EXPECT_EQ(z->ranks[1].steps, (std::vector<double>{3, 3}));
}

TEST(ZeroCheckpointTest, Stage3CutsEveryParameterOnItsOwn) {
  auto z = Open("zero3");
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(z->stage, 3);
  EXPECT_TRUE(z->ok()) << ::testing::PrintToString(Problems(*z));
  EXPECT_EQ(Pieces(Param(*z, "fc1.weight")), (std::vector<std::string>{"0@0+24->0", "1@0+24->24"}));
  EXPECT_EQ(Pieces(Param(*z, "fc2.weight")), (std::vector<std::string>{"0@24+12->0", "1@24+12->12"}));
  EXPECT_EQ(Pieces(Param(*z, "fc2.bias")), (std::vector<std::string>{"0@12+2->0", "1@12+1->2"}));
  EXPECT_EQ(z->groups[1].padding, (std::vector<uint64_t>{0, 1}));
  // The frozen embedding (30 elements) is cut 15 + 15 across the ranks' model states.
  EXPECT_EQ(Pieces(Param(*z, "emb.weight")), (std::vector<std::string>{"0@0+15->0", "1@0+15->15"}));
}

TEST(ZeroCheckpointTest, Stage1ListsNoFrozenParameters) {
  auto z = Open("zero1");
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(z->stage, 1);
  EXPECT_TRUE(z->ok()) << ::testing::PrintToString(Problems(*z));
  for (const ZeroParam& p : z->params) EXPECT_GE(p.group, 0) << p.name;  // frozen_param_shapes is None
  EXPECT_EQ(z->params.size(), 6u);
}

// bf16 with fp32 gradient accumulation at stage 1 goes to DeepSpeed's
// BF16_Optimizer: bf16_-prefixed files with ZeRO-1's partition keys but no
// zero_stage, and fp32 partitions saved with their padding (ZeRO-1/2 cut it).
TEST(ZeroCheckpointTest, Bf16OptimizerFilesReadAsStageOnePartitions) {
  auto z = Open("zero1-bf16-fp32accum");
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(z->stage, 1);
  EXPECT_TRUE(z->bf16_optimizer);
  EXPECT_EQ(z->optim_prefix, "bf16_");
  EXPECT_EQ(Problems(*z), std::vector<std::string>{});
  ASSERT_EQ(z->groups.size(), 2u);
  EXPECT_EQ(z->groups[1].partition_numel, (std::vector<uint64_t>{14, 14}));
  EXPECT_EQ(z->groups[1].padding, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(Pieces(Param(*z, "norm.weight")), (std::vector<std::string>{"0@8+6->0", "1@0+2->6"}));
  // ZeRO-2 with bf16 parameters keeps DeepSpeedZeroOptimizer's layout under the same file prefix.
  auto z2 = Open("zero2-bf16");
  ASSERT_NE(z2, nullptr);
  EXPECT_EQ(z2->stage, 2);
  EXPECT_FALSE(z2->bf16_optimizer);
  EXPECT_EQ(z2->optim_prefix, "bf16_");
  EXPECT_EQ(Problems(*z2), std::vector<std::string>{});
}

TEST(ZeroCheckpointTest, MissingRankFileIsAProblemNotAnError) {
  for (const char* dir : {"zero1_missing_rank", "zero3_missing_rank"}) {
    auto z = Open(dir);
    ASSERT_NE(z, nullptr);
    EXPECT_EQ(Problems(*z), (std::vector<std::string>{"missing-file zero_pp_rank_1_mp_rank_00_optim_states.pt: rank 1's "
                                                      "optimizer partition is missing (2 ranks saved)"}))
        << dir;
    auto written = ConsolidateZero(*z, RepoPath("testdata/.zero-unit-never.pt"));
    ASSERT_FALSE(written.ok());
    EXPECT_NE(std::string(written.status().message()).find("cannot be put together"), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(RepoPath("testdata/.zero-unit-never.pt")));
  }
}

TEST(ZeroCheckpointTest, RankFileOfALaterSaveDisagreesOnSteps) {
  auto z = Open("zero2_mixed_steps");
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(Problems(*z),
            (std::vector<std::string>{
                "steps-differ zero_pp_rank_1_mp_rank_00_optim_states.pt: group 0: step 4, rank 0 is at step 3: the "
                "rank files are from different saves",
                "steps-differ zero_pp_rank_1_mp_rank_00_optim_states.pt: group 1: step 4, rank 0 is at step 3: the "
                "rank files are from different saves"}));
}

TEST(ZeroCheckpointTest, RankFileOfAnotherModelDoesNotTile) {
  auto z = Open("zero2_foreign_rank");
  ASSERT_NE(z, nullptr);
  std::vector<std::string> kinds;
  for (const ZeroLayoutProblem& p : z->problems) kinds.push_back(p.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"partition-size", "partition-size", "tiling", "partition-size", "tiling",
                                             "partition-size"}));
  EXPECT_EQ(z->problems[0].message, "a partition of 46 elements, rank 0's has 36");
  EXPECT_EQ(z->problems[2].message,
            "param_slice_mappings disagree with the parameter shapes; fc1.weight recorded at 0+14, the shapes place "
            "it at 0+12; fc2.weight recorded at 14+30, the shapes place it at 12+24");
}

// The bytes of the tensor reached from the root by `keys` (str keys, or ints
// written as digits) in `file`.
std::vector<std::byte> TensorAt(const CheckpointFile& file, const std::vector<std::string>& keys) {
  const Checkpoint& cp = file.checkpoint();
  const ObjectGraph& g = cp.graph;
  NodeId n = g.root;
  for (const std::string& key : keys) {
    NodeId next = kNoNode;
    if (n != kNoNode && g.at(n).kind == NodeKind::kDict) {
      for (const auto& [k, v] : g.at(n).entries) {
        const Node& kn = g.at(k);
        if ((kn.kind == NodeKind::kStr && kn.text == key) ||
            (kn.kind == NodeKind::kInt && std::to_string(kn.int_value) == key)) {
          next = v;
        }
      }
    }
    n = next;
  }
  if (n == kNoNode || g.at(n).kind != NodeKind::kTensor) {
    ADD_FAILURE() << file.path() << ": no tensor at " << ::testing::PrintToString(keys);
    return {};
  }
  auto bytes = ReadTensorBytes(file.bytes(), cp, cp.tensors[g.at(n).tensor]);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::vector<std::byte>{};
}

// Consolidated weights are zero_to_fp32's bit for bit, and each parameter's
// moments are what DeepSpeed's safe_get_full_optimizer_state gave in the run.
TEST(ZeroCheckpointTest, ConsolidationEqualsDeepSpeedsOwnAnswers) {
  const std::string out = RepoPath("testdata/.zero-unit-consolidated.pt");
  const std::vector<std::string> order = {"fc1.weight", "fc2.weight", "fc1.bias", "norm.weight", "norm.bias", "fc2.bias"};
  // zero2-bf16: bf16 parameters, ZeRO-2's fp32 partitions; zero1-bf16-fp32accum: BF16_Optimizer's
  // files, which DeepSpeed's zero_to_fp32 refuses, so its weights are checked against the run's
  // safe_get_full_fp32_param alone.
  for (const char* dir : {"zero1", "zero2", "zero3", "zero2-bf16", "zero1-bf16-fp32accum"}) {
    SCOPED_TRACE(dir);
    auto z = Open(dir);
    ASSERT_NE(z, nullptr);
    ZeroConsolidateOptions o;
    o.write.durability = Durability::kUnsynced;
    auto report = ConsolidateZero(*z, out, o);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_EQ(report->trainable, 6u);
    EXPECT_EQ(report->frozen, 1u);
    EXPECT_EQ(report->state_entries, 6u);
    EXPECT_EQ(report->state_fields, (std::vector<std::string>{"exp_avg", "exp_avg_sq", "step"}));
    auto ours = OpenCheckpoint(out);
    auto truth = OpenCheckpoint(RepoPath("testdata/frameworks/deepspeed_0.16.4/" + std::string(dir) + ".optimizer_truth.pt"));
    ASSERT_TRUE(ours.ok() && truth.ok());
    std::unique_ptr<CheckpointFile> weights;  // zero_to_fp32's answer, where DeepSpeed gives one
    if (std::string(dir) != "zero1-bf16-fp32accum") {
      auto opened = OpenCheckpoint(RepoPath("testdata/frameworks/deepspeed_0.16.4/" + std::string(dir) + ".zero_to_fp32.pt"));
      ASSERT_TRUE(opened.ok()) << opened.status().ToString();
      weights = std::move(*opened);
    }
    for (size_t i = 0; i < order.size(); ++i) {
      const std::string& name = order[i];
      std::vector<std::byte> weight = TensorAt(**ours, {"model", name});
      EXPECT_EQ(weight.size(), 4 * Param(*z, name).numel) << name;
      if (weights) {
        EXPECT_EQ(weight, TensorAt(*weights, {name})) << name;
      }
      EXPECT_EQ(weight, TensorAt(**truth, {name, "fp32"})) << name;
      for (const char* field : {"exp_avg", "exp_avg_sq"}) {
        EXPECT_EQ(TensorAt(**ours, {"optimizer", "state", std::to_string(i), field}), TensorAt(**truth, {name, field}))
            << name << "." << field;
      }
    }
    std::filesystem::remove(out);
  }
}

// A job of several processes writing the same output (`.<name>.partial`
// beside it): one process refuses rather than race it for the name.
TEST(ZeroCheckpointTest, ConsolidationRefusesAnOutputAJobIsWriting) {
  const std::string dir = ::testing::TempDir() + "/zero_busy";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  { std::ofstream(dir + "/.out.pt.partial") << "half"; }
  auto z = Open("zero2");
  ASSERT_NE(z, nullptr);
  auto report = ConsolidateZero(*z, dir + "/out.pt");
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().ToString(), "invalid argument: " + dir +
                                            "/.out.pt.partial: exists: another run is writing " + dir +
                                            "/out.pt, or one was interrupted (then remove it)");
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.pt"));
}

// consolidate --distributed of a ZeRO directory, two processes played by two
// threads: the bytes one process writes, and each process's progress runs to
// its own share (the shares add up to the whole).
TEST(ZeroCheckpointTest, TwoProcessesWriteTheBytesOneWrites) {
  const std::string dir = ::testing::TempDir() + "/zero_together";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/one");
  std::filesystem::create_directories(dir + "/two");
  for (const char* stage : {"zero2", "zero3"}) {
    SCOPED_TRACE(stage);
    auto z = Open(stage);
    ASSERT_NE(z, nullptr);
    ZeroConsolidateOptions o;
    o.write.durability = Durability::kUnsynced;
    auto alone = ConsolidateZero(*z, dir + "/one/out.pt", o);
    ASSERT_TRUE(alone.ok()) << alone.status().ToString();
    TwoThreadJob job;
    std::vector<std::pair<uint64_t, uint64_t>> progress[2];
    StatusOr<ZeroConsolidateReport> reports[2] = {InternalError("not run"), InternalError("not run")};
    auto run = [&](int rank) {
      ThreadCoordinator co(job, rank);
      auto mine = OpenZeroCheckpoint(Tag(stage));
      if (!mine.ok()) return reports[rank] = mine.status(), void();
      ZeroConsolidateOptions p = o;
      p.coordinator = &co;
      p.progress = [&progress, rank](uint64_t done, uint64_t total) { progress[rank].emplace_back(done, total); };
      reports[rank] = ConsolidateZero(**mine, dir + "/two/out.pt", p);
    };
    std::thread rank1([&] { run(1); });
    run(0);
    rank1.join();
    ASSERT_TRUE(reports[0].ok()) << reports[0].status().ToString();
    ASSERT_TRUE(reports[1].ok()) << reports[1].status().ToString();
    EXPECT_TRUE(testing::FileContents(dir + "/two/out.pt") == testing::FileContents(dir + "/one/out.pt"))
        << "the bytes differ";
    uint64_t shares = 0;
    for (const auto& calls : progress) {
      ASSERT_FALSE(calls.empty());
      EXPECT_EQ(calls.back().first, calls.back().second);
      shares += calls.back().second;
    }
    EXPECT_EQ(shares, alone->tensor_bytes);
  }
}

// A NaN written into rank 1's fp32 master weights (a copy of the real
// directory): no file's optimizer rules see it, the directory's check does.
TEST(ZeroCheckpointTest, NonFiniteMasterWeightIsFound) {
  const std::string dir = (std::filesystem::temp_directory_path() / "optstate-zero-nan-master").string();
  std::filesystem::remove_all(dir);
  std::filesystem::copy(Tag("zero2"), dir);
  const std::string rank1 = dir + "/zero_pp_rank_1_mp_rank_00_optim_states.pt";
  uint64_t offset = 0;
  {
    auto z = OpenZeroCheckpoint(dir);
    ASSERT_TRUE(z.ok()) << z.status().ToString();
    const ZeroRank& r = (*z)->ranks[1];
    const Checkpoint& cp = r.optim->checkpoint();
    auto span = TensorBytesInPlace(r.optim->bytes(), cp, cp.tensors[cp.graph.at(r.fp32_partitions[0]).tensor]);
    ASSERT_TRUE(span.ok() && *span);
    offset = static_cast<uint64_t>((*span)->data() - r.optim->bytes().data()) + 4 * 7;  // element 7 of group 0
  }
  const float nan = std::nanf("");
  std::fstream f(rank1, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(reinterpret_cast<const char*>(&nan), sizeof nan);
  f.close();
  auto report = ValidateZeroDirectory(dir, ValidateOptions{});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->findings.size(), 1u);
  EXPECT_EQ(report->findings[0].rule, "non-finite");
  EXPECT_EQ(report->findings[0].path, rank1 + ": group 0 fp32 master weights");
  EXPECT_EQ(report->findings[0].message, "1 of 36 values are NaN or infinite: training resumes from these weights.");
  EXPECT_TRUE(report->failed());
  ValidateOptions structure_only;
  structure_only.scan_values = false;
  auto skipped = ValidateZeroDirectory(dir, structure_only);
  ASSERT_TRUE(skipped.ok());
  EXPECT_TRUE(skipped->findings.empty());
  std::filesystem::remove_all(dir);
}

TEST(ZeroCheckpointTest, NotAZeroDirectory) {
  auto z = OpenZeroCheckpoint(RepoPath("testdata/good/torch26"));
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(IsZeroTagDirectory(RepoPath("testdata/good/torch26")));
  EXPECT_TRUE(IsZeroTagDirectory(Tag("zero2")));
}

}  // namespace
}  // namespace optstate
