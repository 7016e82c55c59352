// Reads the trajectory files gen_adamw_parity.py and gen_optimizer_parity.py
// write (a torch.save dict of cases, tensors flat one row per step) for the
// kernels' parity tests.
#ifndef OPTSTATE_TESTS_UNIT_PARITY_FILE_H_
#define OPTSTATE_TESTS_UNIT_PARITY_FILE_H_

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "optstate/checkpoint.h"
#include "optstate/pickle_graph.h"
#include "fixtures.h"

namespace optstate::testing {

struct ParityFile {
  std::unique_ptr<CheckpointFile> file;
  const ObjectGraph& g() const { return file->checkpoint().graph; }
  NodeId Get(NodeId dict, const char* key) const { return DictLookup(g(), dict, key); }
  bool Has(NodeId dict, const char* key) const { return Get(dict, key) != kNoNode; }
  // An int, float or bool entry as a double.
  double Number(NodeId dict, const char* key) const {
    const Node& n = g().at(Get(dict, key));
    if (n.kind == NodeKind::kBool) return n.bool_value;
    return n.kind == NodeKind::kFloat ? n.float_value : static_cast<double>(n.int_value);
  }
  // A float32 tensor entry's values; empty when absent.
  std::vector<float> Floats(NodeId dict, const std::string& key) const {
    NodeId id = Get(dict, key.c_str());
    if (id == kNoNode) return {};
    const TensorRef& t = file->checkpoint().tensors[g().at(id).tensor];
    auto bytes = ReadTensorBytes(file->bytes(), file->checkpoint(), t);
    EXPECT_TRUE(bytes.ok());
    std::vector<float> out(bytes->size() / 4);
    if (!out.empty()) std::memcpy(out.data(), bytes->data(), bytes->size());
    return out;
  }
};

// The parameter tolerance both parity tests hold the kernels to: a float32
// parameter (of order 1) within 2e-6 of torch's after every step, a
// bfloat16/float16 one within 8e-3 relative (one unit in the last place of the
// stored value, where a rounding went the other way).
inline void ExpectParamsMatchTorch(const ParityFile& f, NodeId c, double max_abs_param, double max_rel_param) {
  if (f.g().at(f.Get(c, "dtype")).text != "float32") {
    EXPECT_LE(max_rel_param, 8e-3);
  } else {
    EXPECT_LE(max_abs_param, 2e-6);
  }
}

// Calls `check(file, case, line, name)` for every case of testdata/good/<line>/<name>
// made by torch 1.13 and by 2.6, after checking that the file holds `cases` of them.
inline void ForEachParityCase(const char* name, size_t cases,
                              const std::function<void(const ParityFile&, NodeId, const char* line,
                                                       const std::string& case_name)>& check) {
  for (const char* line : {"torch113", "torch26"}) {
    ParityFile f;
    auto opened = OpenCheckpoint(RepoPath(std::string("testdata/good/") + line + "/" + name));
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    f.file = std::move(*opened);
    NodeId all = f.Get(f.g().root, "cases");
    ASSERT_NE(all, kNoNode);
    ASSERT_EQ(f.g().at(all).items.size(), cases);
    for (NodeId c : f.g().at(all).items) {
      std::string case_name = f.g().at(f.Get(c, "name")).text;
      SCOPED_TRACE(std::string(line) + " " + case_name);
      check(f, c, line, case_name);
    }
  }
}

}  // namespace optstate::testing

#endif  // OPTSTATE_TESTS_UNIT_PARITY_FILE_H_
