// validate: which rules fire on which real fixtures (and which stay quiet),
// rules files, and the JUnit report's structure.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "fixtures.h"
#include "optstate/params.h"
#include "optstate/validate.h"
#include "validate_command.h"

namespace optstate {
namespace {

std::set<std::string> Fired(const std::string& fixture, bool values = true) {
  ValidateOptions o;
  o.scan_values = values;
  auto r = Validate(testing::RepoPath(fixture), o);
  EXPECT_TRUE(r.ok()) << fixture << ": " << r.status().ToString();
  std::set<std::string> out;
  if (r.ok()) {
    for (const ValidationFinding& f : r->findings) out.insert(f.rule);
  }
  return out;
}

TEST(ValidateTest, RulesFireOnTheFixturesMadeForThem) {
  using Set = std::set<std::string>;
  EXPECT_EQ(Fired("testdata/good/torch113/adamw_index.pt"), Set{});
  EXPECT_EQ(Fired("testdata/good/torch26/adamw_index.pt"), Set{});
  EXPECT_EQ(Fired("testdata/good/torch113/heavyball_ptr_shape.pt"), Set{"state-keys-not-canonical"});
  EXPECT_EQ(Fired("testdata/good/torch113/string_index.pt"), Set{"state-keys-not-canonical"});
  EXPECT_EQ(Fired("testdata/good/torch113/dcp_init_untrained.pt"), Set{"untrained-init-state"});
  EXPECT_EQ(Fired("testdata/good/torch113/dcp_init_untrained.pt", /*values=*/false), Set{});
  EXPECT_TRUE(Fired("testdata/hostile/os_system_global.pt").count("dangerous-global"));
  EXPECT_TRUE(Fired("testdata/hostile/heavyball_rng_bytes.pt").count("nested-pickle"));
  EXPECT_EQ(Fired("testdata/validate/lr_zero_leak.pt"), Set{"lr-zero-with-steps"});
  EXPECT_EQ(Fired("testdata/validate/duplicate_param.pt"), Set{"param-group-duplicate"});
  EXPECT_EQ(Fired("testdata/validate/frozen_param.pt"), Set{"param-without-state"});
  EXPECT_EQ(Fired("testdata/validate/ghost_state.pt"), Set{"state-without-param"});
  EXPECT_EQ(Fired("testdata/validate/args_namespace.pt"), Set{"global-not-allowlisted"});
  EXPECT_EQ(Fired("testdata/good/torch26/fsdp2_dcp"), Set{});
  EXPECT_EQ(Fired("testdata/good/torch26/fsdp2_3rank_dcp"), Set{});
  EXPECT_EQ(Fired("testdata/hostile/dcp/overlapping_chunks"), Set{"dcp-chunk-layout"});
  EXPECT_EQ(Fired("testdata/hostile/dcp/chunk_outside_tensor"), Set{"dcp-chunk-layout"});
  EXPECT_EQ(Fired("testdata/validate/frozen_backbone.pt"), Set{"model-params-not-in-optimizer"});
  EXPECT_EQ(Fired("testdata/validate/foreign_optimizer.pt"), Set{"param-count-mismatch"});
  EXPECT_EQ(Fired("testdata/validate/weight_decay_groups.pt"), Set{});
  // torchtitan v0.1.0's own checkpoints: lr 0 at the schedule's end is no leak, and the rotary
  // table its model keeps as a persistent buffer is named in no param group: a note, not a warning.
  const std::string titan = "testdata/frameworks/torchtitan_0.1.0/";
  EXPECT_EQ(Fired(titan + "run/checkpoint/step-6"), (Set{"nested-pickle", "model-entries-not-optimized"}));
  EXPECT_EQ(Fired(titan + "nan/checkpoint/step-6"),
            (Set{"nested-pickle", "model-entries-not-optimized", "non-finite"}));
  EXPECT_EQ(Fired(titan + "model_only/checkpoint/step-6"), Set{});
}

TEST(ValidateTest, ModelEntriesTheOptimizerDoesNotNameAreANote) {
  ValidateOptions o;
  auto r = Validate(testing::RepoPath("testdata/frameworks/torchtitan_0.1.0/run/checkpoint/step-6"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ValidationFinding* note = nullptr;
  for (const ValidationFinding& f : r->findings) {
    if (f.rule == "model-entries-not-optimized") note = &f;
  }
  ASSERT_NE(note, nullptr);
  EXPECT_EQ(note->severity, RuleSeverity::kInfo);
  EXPECT_NE(note->message.find("1 of them named in no param group (freqs_cis)"), std::string::npos) << note->message;
}

std::vector<std::string> Skipped(const ValidationReport& r) {
  std::vector<std::string> out;
  for (auto& [id, why] : r.skipped) out.push_back(id);
  return out;
}

TEST(ValidateTest, CountsAgainstTheModelRunWhenTheOrderCannotBeDecided) {
  // Two frozen layers shaped like trained ones: several assignments fit, so the
  // matching rules wait for a manifest, but the counts are compared all the same.
  auto r = Validate(testing::RepoPath("testdata/frameworks/groups_torch26/frozen_ambiguous.pt"), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Skipped(*r), (std::vector<std::string>{"state-collision", "state-orphan", "state-shape-mismatch",
                                                 "state-schema-unknown"}));
  EXPECT_NE(std::find(r->checked.begin(), r->checked.end(), "param-count-mismatch"), r->checked.end());
  // Two groups whose shapes allow one assignment: every rule runs, quietly.
  r = Validate(testing::RepoPath("testdata/validate/weight_decay_groups.pt"), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->findings.empty());
  EXPECT_TRUE(r->skipped.empty());
  ValidateOptions o;
  // The manifest written with groups gives the same.
  o.params = ParamSource{testing::RepoPath("testdata/validate/weight_decay_groups.manifest.json"), "", ""};
  r = Validate(testing::RepoPath("testdata/validate/weight_decay_groups.pt"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->findings.empty());
  EXPECT_TRUE(r->skipped.empty());
  // The same parameters grouped [3, 1] instead of [2, 2].
  o.params = ParamSource{testing::RepoPath("testdata/validate/weight_decay_groups.regrouped.manifest.json"), "", ""};
  r = Validate(testing::RepoPath("testdata/validate/weight_decay_groups.pt"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->findings.size(), 1u);
  EXPECT_EQ(r->findings[0].rule, "param-count-mismatch");
  EXPECT_EQ(r->findings[0].path, "optimizer.param_groups");
  EXPECT_NE(r->findings[0].message.find("group sizes [2, 2] but the manifest"), std::string::npos);
}

TEST(ValidateTest, ParameterListRulesRunOnDcpDirectories) {
  // The directory's own model entry: every rule runs.
  auto r = Validate(testing::RepoPath("testdata/good/torch26/fsdp2_3rank_dcp"), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->skipped.empty());
  EXPECT_TRUE(r->findings.empty());
  // A manifest of the same names with one 2-d shape transposed.
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"emb.weight", {6, 10}}, {"fc1.weight", {6, 6}}, {"fc1.bias", {6}},      {"fc2.weight", {6, 6}}, {"fc2.bias", {6}},
      {"head.weight", {3, 6}}, {"head.bias", {3}},     {"gate.weight", {1, 6}}, {"gate.bias", {1}}};
  std::vector<ParamInfo> params;
  for (auto& [name, shape] : shapes) {
    params.emplace_back();
    params.back().name = name;
    params.back().shape = shape;
  }
  std::string manifest = (std::filesystem::temp_directory_path() /
                          ("optstate-validate-" + std::to_string(::getpid()) + ".json")).string();
  {
    std::ofstream f(manifest);
    f << ParamManifestText(params);
  }
  ValidateOptions o;
  o.params = ParamSource{manifest, "", ""};
  r = Validate(testing::RepoPath("testdata/good/torch26/fsdp2_3rank_dcp"), o);
  std::filesystem::remove(manifest);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::set<std::string> paths;
  for (const ValidationFinding& f : r->findings) {
    EXPECT_EQ(f.rule, "state-shape-mismatch");
    paths.insert(f.path);
  }
  EXPECT_EQ(paths, (std::set<std::string>{"optim.state[emb.weight].exp_avg", "optim.state[emb.weight].exp_avg_sq"}));
}

TEST(ValidateTest, ParameterListRules) {
  ValidateOptions o;
  o.params = ParamSource{testing::RepoPath("testdata/good/torch113/heavyball_fsdp_collision.manifest.json"), "", ""};
  auto r = Validate(testing::RepoPath("testdata/good/torch113/heavyball_fsdp_collision.pt"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  size_t collisions = 0;
  for (const ValidationFinding& f : r->findings) collisions += f.rule == "state-collision";
  EXPECT_EQ(collisions, 2u);  // [8, 8] x 2 and [8] x 4
  o.params = ParamSource{testing::RepoPath("tests/cli/inputs/adamw_index_wrong_shape.manifest.json"), "", ""};
  r = Validate(testing::RepoPath("testdata/good/torch113/adamw_index.pt"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->findings.size(), 2u);
  EXPECT_EQ(r->findings[0].rule, "state-shape-mismatch");
  EXPECT_EQ(r->findings[0].path, "state[0].exp_avg");
  // The same checkpoint with a fitting list: quiet.
  o.params = ParamSource{"", testing::RepoPath("testdata/good/torch113/heavyball_param_view.pt"), "model"};
  r = Validate(testing::RepoPath("testdata/good/torch113/adamw_index.pt"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->findings.empty());
  EXPECT_TRUE(r->skipped.empty());
}

TEST(ValidateTest, UnreadableInputIsAnErrorNotAFinding) {
  auto r = Validate(testing::RepoPath("testdata/hostile/dcp/path_traversal"), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
}

TEST(ValidateTest, RulesFiles) {
  auto good = ParseRulesFile(R"({"rules": {"non-finite": "warning", "crc-mismatch": "off"}})");
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->severities.at("non-finite"), RuleSeverity::kWarning);
  EXPECT_EQ(good->severities.at("crc-mismatch"), RuleSeverity::kOff);
  EXPECT_EQ(ParseRulesFile(R"({"rules": {"nope": "error"}})").status().ToString(),
            "invalid argument: rules file: unknown rule 'nope' (optstate validate --list-rules)");
  EXPECT_EQ(ParseRulesFile(R"({"rules": {"non-finite": "fatal"}})").status().ToString(),
            "invalid argument: rules file: rule 'non-finite' needs one of \"off\", \"info\", \"warning\", \"error\"");
  EXPECT_EQ(ParseRulesFile("[1, 2").status().ToString(), "invalid argument: rules file: not a JSON object");
  // An error turned off no longer fails the gate.
  ValidateOptions o;
  o.severities = ParseRulesFile(R"({"rules": {"state-keys-not-canonical": "off"}})")->severities;
  auto r = Validate(testing::RepoPath("testdata/good/torch113/heavyball_ptr_shape.pt"), o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->findings.empty());
  EXPECT_FALSE(r->failed());
}

// accelerate's RNG file pickles numpy's RNG state: three globals outside torch's
// allowlist. A rules file names them; the warnings go, every other rule stays,
// and a dangerous global cannot be allowlisted.
TEST(ValidateTest, RulesFilesAllowlistGlobalsByName) {
  const std::string rng = testing::RepoPath("testdata/frameworks/accelerate_rng_torch113/random_states_0.pkl");
  auto plain = Validate(rng, {});
  ASSERT_TRUE(plain.ok());
  ASSERT_EQ(plain->findings.size(), 3u);
  EXPECT_EQ(plain->findings[0].rule, "global-not-allowlisted");
  auto rules = ParseRulesFile(R"({"allow_globals": ["numpy.core.multiarray._reconstruct", "numpy.ndarray"]})");
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  ValidateOptions o;
  o.allowed_globals = rules->allowed_globals;
  auto r = Validate(rng, o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->findings.size(), 1u);
  EXPECT_NE(r->findings[0].message.find("numpy.dtype"), std::string::npos);
  EXPECT_EQ(r->allowlisted, (std::vector<std::string>{"numpy.core.multiarray._reconstruct (1 reference)",
                                                      "numpy.ndarray (1 reference)"}));
  EXPECT_EQ(r->checked, plain->checked);
  EXPECT_EQ(ParseRulesFile(R"({"allow_globals": ["os.system"]})").status().ToString(),
            "invalid argument: rules file: allow_globals[0]: 'os.system' can run code or reach the system; it "
            "cannot be allowlisted");
  EXPECT_EQ(ParseRulesFile(R"({"allow_globals": ["numpy"]})").status().ToString(),
            "invalid argument: rules file: allow_globals[0]: 'numpy' is not \"module.name\"");
  EXPECT_EQ(ParseRulesFile(R"({"allow": []})").status().ToString(),
            "invalid argument: rules file: needs {\"rules\": {\"<rule id>\": \"off|info|warning|error\"}} and/or "
            "{\"allow_globals\": [\"module.name\", ...]}");
}

TEST(ValidateTest, JUnitHasOneCasePerRuleAndFailsOnErrors) {
  ValidationReport r;
  r.input = "ckpt <1>.pt";
  r.findings.push_back({"non-finite", RuleSeverity::kError, "state[0].exp_avg", "2 values are NaN & <bad>", ""});
  r.findings.push_back({"steps-differ-in-group", RuleSeverity::kWarning, "param_groups[0]", "steps 1 to 3", ""});
  r.skipped.emplace_back("crc-mismatch", "--no-values");
  std::string xml = tools::ValidationJUnit(r);
  size_t cases = 0;
  for (size_t at = xml.find("<testcase "); at != std::string::npos; at = xml.find("<testcase ", at + 1)) ++cases;
  EXPECT_EQ(cases, ValidationRules().size());
  EXPECT_NE(xml.find("failures=\"1\" errors=\"0\" skipped=\"1\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("classname=\"ckpt &lt;1&gt;.pt\" name=\"non-finite\">\n      <failure message=\"error "
                     "state[0].exp_avg: 2 values are NaN &amp; &lt;bad&gt;\" type=\"non-finite\">"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<system-out>warning param_groups[0]: steps 1 to 3\n</system-out>"), std::string::npos);
  EXPECT_NE(xml.find("name=\"crc-mismatch\">\n      <skipped message=\"--no-values\"/>"), std::string::npos);
}

}  // namespace
}  // namespace optstate
