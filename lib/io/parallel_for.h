// Work spread over threads that take items in turn: the AdamW kernel's chunks
// and regenerate's value blocks. Internal to lib/.
#ifndef OPTSTATE_PARALLEL_FOR_H_
#define OPTSTATE_PARALLEL_FOR_H_

#include <cstddef>
#include <functional>

namespace optstate {

// Calls fn(i) once for every i in [0, count), on up to `threads` threads (the
// caller's among them; never more than count; 0 or less means every hardware
// thread). If the system will not start a thread, the ones there are share the
// work. fn must not throw.
void ParallelFor(size_t count, int threads, const std::function<void(size_t)>& fn);

}  // namespace optstate

#endif  // OPTSTATE_PARALLEL_FOR_H_
