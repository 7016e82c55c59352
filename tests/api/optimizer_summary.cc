// Opens a checkpoint and prints a summary of every optimizer state in it.
#include <cstdio>

#include "optstate/checkpoint.h"
#include "optstate/params.h"

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: optimizer_summary FILE\n"), 2;
  auto file = optstate::OpenCheckpoint(argv[1]);  // maps the file; reads no tensor data
  if (!file.ok()) return std::fprintf(stderr, "%s\n", file.status().ToString().c_str()), 2;
  const optstate::Checkpoint& cp = (*file)->checkpoint();
  for (const std::string& path : optstate::FindOptimizerStates(cp)) {
    auto state = optstate::ReadOptimizerState(cp, path);
    if (!state.ok()) return std::fprintf(stderr, "%s\n", state.status().ToString().c_str()), 2;
    std::printf("%s: %zu state entries keyed %s, %zu parameters in %zu groups\n",
                path.empty() ? "(root)" : path.c_str(), state->keys.size(),
                std::string(optstate::KeyKindName(state->scheme)).c_str(), state->param_count,
                state->group_params.size());
  }
  return 0;
}
