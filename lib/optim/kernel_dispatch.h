// Turns a run-time set of loop flags into a compile-time template argument, so
// that every combination of an optimizer's options is its own loop with no
// branch per element. Internal to lib/; included by the kernel headers only.
#ifndef OPTSTATE_OPTIM_KERNEL_DISPATCH_H_
#define OPTSTATE_OPTIM_KERNEL_DISPATCH_H_

#include <type_traits>
#include <utility>

namespace optstate::optim {
// Anonymous, as the loops it instantiates: each instruction-set file must keep
// its own copies (see adamw_kernel.h).
namespace {

// Calls body(std::integral_constant<int, flags>{}) for flags in [0, kCount).
template <int kCount, typename Body>
inline void DispatchFlags(int flags, Body&& body) {
  [&]<int... kFlags>(std::integer_sequence<int, kFlags...>) {
    (void)((flags == kFlags ? (body(std::integral_constant<int, kFlags>{}), true) : false) || ...);
  }(std::make_integer_sequence<int, kCount>{});
}

}  // namespace
}  // namespace optstate::optim

#endif  // OPTSTATE_OPTIM_KERNEL_DISPATCH_H_
