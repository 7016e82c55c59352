// One plain pickle read as the tests read it: the graph, with torch's rebuild
// calls resolved (a plain pickle has no storages).
#ifndef OPTSTATE_TESTS_UNIT_PARSE_PICKLE_H_
#define OPTSTATE_TESTS_UNIT_PARSE_PICKLE_H_

#include <gtest/gtest.h>

#include <string>

#include "io/byte_cursor.h"
#include "optstate/torch_objects.h"
#include "pickle/pickle_vm.h"

namespace optstate::testing {

inline StatusOr<PickleResult> Parse(const std::string& bytes, const PickleLimits& limits = {}) {
  ByteCursor c(AsBytes(bytes));
  OPTSTATE_ASSIGN_OR_RETURN(PickleResult r, ReadPickle(c, limits));
  auto no_storage = [](StorageRef&) { return CorruptError("plain pickles have no storages"); };
  OPTSTATE_RETURN_IF_ERROR(ResolveTorchObjects(r.graph, no_storage, limits.max_depth).status());
  return r;
}

// `s` with its first `from` replaced by `to` (a test failure when it has none).
inline std::string Replace(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << "pattern not in fixture";
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

}  // namespace optstate::testing

#endif  // OPTSTATE_TESTS_UNIT_PARSE_PICKLE_H_
