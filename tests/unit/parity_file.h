// Reads the trajectory files gen_adamw_parity.py and gen_optimizer_parity.py
// write (a torch.save dict of cases, tensors flat one row per step) for the
// kernels' parity tests.
#ifndef OPTSTATE_TESTS_UNIT_PARITY_FILE_H_
#define OPTSTATE_TESTS_UNIT_PARITY_FILE_H_

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "optstate/checkpoint.h"
#include "optstate/pickle_graph.h"

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

}  // namespace optstate::testing

#endif  // OPTSTATE_TESTS_UNIT_PARITY_FILE_H_
