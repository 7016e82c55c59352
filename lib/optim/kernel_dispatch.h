// Turns a run-time set of loop flags into a compile-time template argument, so
// that every combination of an optimizer's options is its own loop with no
// branch per element; and the entry points the loops are compiled into.
// Internal to lib/; included by the kernel headers only.
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

// The entry points: one per family and instruction set, each defined in its
// own file (adamw_<isa>.cc, family_<isa>.cc) from its kernel header's loops.
struct Chunk;        // adamw_kernel.h
struct FamilyChunk;  // family_kernel.h
void RunChunkGeneric(const Chunk& c);
void RunChunkAvx2(const Chunk& c);
void RunChunkAvx512(const Chunk& c);
void RunFamilyChunkGeneric(const FamilyChunk& c);
void RunFamilyChunkAvx2(const FamilyChunk& c);
void RunFamilyChunkAvx512(const FamilyChunk& c);

}  // namespace optstate::optim

#endif  // OPTSTATE_OPTIM_KERNEL_DISPATCH_H_
