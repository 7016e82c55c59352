// verify on checkpoints torch.optim itself saved with each algorithm it
// replays (testdata/gen/gen_optimizer_family.py, torch 1.13 and 2.6): healthy
// files clean, the parameter given DCP's init-step state found cold, the
// planted NaN found, exactly as the generator's truth.json records.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "fixtures.h"
#include "optstate/state_matching.h"
#include "optstate/verify.h"

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

}  // namespace
}  // namespace optstate
