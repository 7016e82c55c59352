// verify on checkpoints torch.optim itself saved with each algorithm it
// replays (testdata/gen/gen_optimizer_family.py, torch 1.13 and 2.6): healthy
// files clean, the parameter given DCP's init-step state found cold, the
// planted NaN found, exactly as the generator's truth.json records.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fixtures.h"
#include "optstate/collisions.h"
#include "optstate/optimizer.h"
#include "optstate/validate.h"

namespace optstate {
namespace {

TEST(VerifyFamilyTest, EveryAlgorithmAsTorchSavedIt) {
  for (const char* line : {"family_torch113", "family_torch26"}) {
    const std::string dir = testing::RepoPath(std::string("testdata/frameworks/") + line + "/");
    std::ifstream in(dir + "truth.json");
    ASSERT_TRUE(in.good()) << dir;
    nlohmann::json truth = nlohmann::json::parse(in);
    ASSERT_EQ(truth["files"].size(), 22u);
    for (const auto& [file, want] : truth["files"].items()) {
      SCOPED_TRACE(std::string(line) + "/" + file);
      auto m = OpenAndMatch(dir + file, "", ParamSource(), {}, {});
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      auto r = VerifyState(*m);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      std::string algorithm = want["algorithm"];
      // torch 1.13's Adam saves the group keys every Adam and AdamW since 2.0 save:
      // the file cannot tell them apart (replayed as AdamW; its init step checked as both).
      EXPECT_EQ(r->algorithm, algorithm == "adam" ? "adam-or-adamw" : algorithm);
      EXPECT_TRUE(r->replay_applicable);
      EXPECT_EQ(r->cold, want["cold"].get<std::vector<std::string>>());
      std::vector<std::string> nan, other;
      for (const VerifyFinding& f : r->findings) {
        if (f.check == "non-finite") nan.push_back(f.param);
        // DCP's init step leaves step 1 beside the others' 3: a finding of its own.
        else if (f.check != "cold" && !(f.check == "step-mismatch" && !want["cold"].empty())) other.push_back(f.check);
      }
      EXPECT_EQ(nan, want["nan"].get<std::vector<std::string>>());
      EXPECT_TRUE(other.empty()) << other.front();
      if (want.contains("nan_field")) {
        EXPECT_NE(r->findings.front().message.find(algorithm == "adam" ? "moment" : want["nan_field"].get<std::string>()),
                  std::string::npos);
      }
      // Every parameter replayed where the algorithm keeps state.
      EXPECT_EQ(r->replayed, file == "sgd_plain.pt" ? 0u : 6u);
    }
  }
}

// What accelerate 1.14's save_state and Lightning 2.5's Trainer wrote
// (testdata/gen/gen_framework_runs.py, run with the frameworks' own code): the
// optimizer's parameters found in the order the optimizer holds them (two
// groups: HF's decay split), healthy state clean, the planted NaN found.
TEST(VerifyFamilyTest, CheckpointsTheFrameworksSaved) {
  const std::string dir = testing::RepoPath("testdata/frameworks/runs_torch26/");
  std::ifstream in(dir + "truth.json");
  ASSERT_TRUE(in.good());
  nlohmann::json truth = nlohmann::json::parse(in);
  ASSERT_EQ(truth["files"].size(), 5u);
  for (const auto& [name, want] : truth["files"].items()) {
    SCOPED_TRACE(name);
    std::string optimizer = dir + name;
    ParamSource source;
    if (want.contains("files")) {  // accelerate: a directory
      auto fd = FindFrameworkFiles(dir + name);
      ASSERT_TRUE(fd.ok()) << fd.status().ToString();
      EXPECT_EQ(fd->layout, "accelerate");
      ASSERT_NE(fd->Find("optimizer"), nullptr);
      ASSERT_NE(fd->Find("model"), nullptr);
      optimizer = fd->Find("optimizer")->path;
      source.model = fd->Find("model")->path;
    }
    auto m = OpenAndMatch(optimizer, "", source, {}, {});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    // Every position the files decide is right; safetensors keeps no module
    // order, so same-shape parameters are named as a guess, and said to be.
    const auto truth_order = want["optimizer_order"].get<std::vector<std::string>>();
    ASSERT_EQ(m->params.size(), truth_order.size());
    std::vector<std::string> wrong;
    for (size_t i = 0; i < truth_order.size(); ++i) {
      if (m->params[i].name != truth_order[i]) wrong.push_back(truth_order[i]);
    }
    for (const std::string& misplaced : wrong) {
      EXPECT_NE(std::find(m->order_ambiguous.begin(), m->order_ambiguous.end(), misplaced), m->order_ambiguous.end())
          << misplaced << " is misplaced and not reported as a guess";
    }
    if (want.contains("files")) {  // accelerate 1.14: the three [8] parameters of the no-decay group
      EXPECT_EQ(m->order_ambiguous, (std::vector<std::string>{"0.bias", "1.bias", "1.weight"}));
    } else {
      EXPECT_TRUE(wrong.empty());  // Lightning's .ckpt keeps the module's order
      EXPECT_TRUE(m->order_ambiguous.empty());
    }
    auto r = VerifyState(*m);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->cold.empty());
    EXPECT_EQ(r->replayed, 6u);
    if (want["nan"].is_null()) {
      EXPECT_TRUE(r->findings.empty()) << r->findings.front().message;
    } else {
      ASSERT_EQ(r->findings.size(), 1u);
      EXPECT_EQ(r->findings[0].check, "non-finite");
      const std::string spoiled = want["nan"];
      if (std::find(m->order_ambiguous.begin(), m->order_ambiguous.end(), spoiled) == m->order_ambiguous.end()) {
        EXPECT_EQ(r->findings[0].param, spoiled);
      } else {  // one of the same-shape parameters, and said to be a guess
        EXPECT_NE(std::find(m->order_ambiguous.begin(), m->order_ambiguous.end(), r->findings[0].param),
                  m->order_ambiguous.end());
        EXPECT_NE(r->findings[0].message.find("the name is a guess"), std::string::npos);
      }
    }
  }
}

}  // namespace
}  // namespace optstate
