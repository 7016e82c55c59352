// Hostile checkpoints (testdata/hostile, made by Python's pickler) are reported,
// and nothing in them runs: their payload would create a marker file.
#include "optstate/security.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "fixtures.h"
#include "optstate/checkpoint.h"
#include "optstate/torch_objects.h"

namespace optstate {
namespace {

constexpr const char* kMarker = "/tmp/optstate-hostile-pickle-ran";

std::vector<std::string> Codes(const std::string& fixture) {
  StatusOr<std::unique_ptr<CheckpointFile>> f = OpenCheckpoint(testing::RepoPath(fixture));
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  std::vector<std::string> codes;
  if (!f.ok()) return codes;
  for (const Finding& x : (*f)->checkpoint().findings) {
    codes.push_back(std::string(SeverityName(x.severity)) + " " + x.code + " " + x.where);
  }
  return codes;
}

TEST(SecurityTest, HostilePicklesAreReportedAndNeverRun) {
  std::filesystem::remove(kMarker);
  EXPECT_EQ(Codes("testdata/hostile/os_system_global.pt"),
            std::vector<std::string>{"error dangerous_global os_system_global/data.pkl offset 383"});
  EXPECT_EQ(Codes("testdata/hostile/os_system_stack_global.pt"),
            std::vector<std::string>{"error dangerous_global os_system_stack_global/data.pkl offset 422"});
  EXPECT_EQ(Codes("testdata/hostile/builtins_eval.pt"),
            std::vector<std::string>{"error dangerous_global builtins_eval/data.pkl offset 383"});
  EXPECT_EQ(Codes("testdata/hostile/nested_pickle_bytes.pt"),
            (std::vector<std::string>{"warning nested_pickle extra",
                                      "error dangerous_global extra (nested pickle) offset 28"}));
  EXPECT_EQ(Codes("testdata/hostile/heavyball_rng_bytes.pt"),
            (std::vector<std::string>{"warning nested_pickle extra",
                                      "warning nested_global extra (nested pickle) offset 29"}));
  EXPECT_FALSE(std::filesystem::exists(kMarker)) << "a hostile pickle ran";
}

// torch 2.6 loaded every real fixture with weights_only=True (their
// .expected.json records it); our scan must agree: no warnings or errors.
TEST(SecurityTest, RealFixturesHaveNoWarningsAsTorch26Agrees) {
  for (const std::string& fixture : testing::AllFixtures()) {
    nlohmann::json want = testing::ExpectedJson(fixture);
    if (want.contains("weights_only_load") && !want["weights_only_load"].is_null()) {
      EXPECT_TRUE(want["weights_only_load"]["ok"].get<bool>()) << fixture;
    }
    for (const std::string& c : Codes(fixture)) {
      EXPECT_TRUE(c.starts_with("info ")) << fixture << ": " << c;
    }
  }
  EXPECT_EQ(Codes("testdata/good/torch26/fsdp2_rank0_optim.pt").size(), 5u);  // the DTensor classes
}

TEST(SecurityTest, AllowlistMatchesTorch26) {
  EXPECT_TRUE(IsWeightsOnlyAllowed("torch._utils", "_rebuild_tensor_v2"));
  EXPECT_TRUE(IsWeightsOnlyAllowed("collections", "OrderedDict"));
  EXPECT_TRUE(IsWeightsOnlyAllowed("__builtin__", "set"));  // Python 2 name, mapped
  EXPECT_TRUE(IsWeightsOnlyAllowed("torch", "BFloat16Storage"));
  EXPECT_TRUE(IsWeightsOnlyAllowed("torch", "bfloat16"));
  EXPECT_TRUE(IsWeightsOnlyAllowed("torch", "float8_e4m3fn"));
  EXPECT_FALSE(IsWeightsOnlyAllowed("torch.distributed.checkpoint.metadata", "Metadata"));
  EXPECT_FALSE(IsWeightsOnlyAllowed("builtins", "getattr"));
  EXPECT_FALSE(IsWeightsOnlyAllowed("random", "Random"));
  EXPECT_TRUE(IsDangerousGlobal("posix", "system"));
  EXPECT_TRUE(IsDangerousGlobal("os.path", "join"));
  EXPECT_TRUE(IsDangerousGlobal("__builtin__", "eval"));
  EXPECT_TRUE(IsDangerousGlobal("subprocess", "Popen"));
  EXPECT_FALSE(IsDangerousGlobal("random", "Random"));
  EXPECT_FALSE(IsDangerousGlobal("torch._utils", "_rebuild_tensor_v2"));
}

}  // namespace
}  // namespace optstate
