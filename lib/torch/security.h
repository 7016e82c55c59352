// The scans behind a checkpoint's findings (Finding, optstate/checkpoint.h):
// what a checkpoint would make Python do on an ordinary torch.load, judged
// without doing it: every global outside torch 2.6's weights_only allowlist, the
// ones that reach the system or run code, and pickles hidden inside bytes values
// (HeavyBall stores pickled objects in its state dict and unpickles them itself).
#ifndef OPTSTATE_TORCH_SECURITY_H_
#define OPTSTATE_TORCH_SECURITY_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "io/byte_cursor.h"
#include "optstate/checkpoint.h"
#include "optstate/pickle_graph.h"
#include "pickle/pickle_vm.h"

namespace optstate {

// Findings for the globals one pickle references. `where` prefixes each
// location (e.g. the record name). `nested`: the pickle sits inside a bytes
// value, so torch.load never sees it; whoever unpickles that value does.
// Default-deny: a global the pickle calls (`called`: CalledGlobalOffsets; null
// = assume every one is) that is neither on torch 2.6's weights_only allowlist
// nor a known data class is an error (unknown-global-called); one only named,
// or a known data class, is a warning (global-not-allowlisted); a dangerous
// one is an error whatever its use (dangerous-global).
// `lookups` (BoundMethodLookups) are builtins.getattr globals used only to
// look an attribute up on a known class or an object the pickle builds of one:
// a warning, not dangerous.
// `nested_reader`: who unpickles a nested pickle, for the messages (default: code
// that unpickles a bytes value).
void ScanGlobals(const std::vector<GlobalRef>& globals, const std::string& where, bool nested,
                 std::vector<Finding>& findings, const std::set<uint64_t>* called = nullptr,
                 const std::set<uint64_t>* lookups = nullptr, std::string_view nested_reader = {});

// Bytes after the STOP of a zip's data.pkl: torch.save writes none and
// torch.load never reads them, but a reader that reads the record on does
// (pickle-tampered, and what a pickle there names, judged as nested).
void ScanBytesAfterStop(ByteSpan rest, uint64_t rest_offset, const std::string& where, const PickleLimits& limits,
                        std::vector<Finding>& findings);

// Offsets of the builtins.getattr GLOBALs whose every call is getattr(obj,
// "name") with obj a known data class, or an instance this pickle builds of
// one (NEWOBJ or copyreg._reconstructor), and name no dunder: how Python pickles
// a bound method (torch 1.13's OneCycleLR keeps self._annealing_cos in its state
// dict) or, at protocol 2, a function nested in a class (SWALR's
// _cosine_anneal). Nothing is called; an attribute of a known object is looked up.
std::set<uint64_t> BoundMethodLookups(const ObjectGraph& graph);

// Calls that allocate what a number in the pickle names, not what the file
// holds: builtins.bytearray(n), on torch 2.6's weights_only allowlist, so even
// torch.load(weights_only=True) allocates n bytes. n above 16 MiB and above
// `source_bytes` (the file's size) is an error (allocation-claim). `globals`
// (the pickle's) decide whether the graph need be walked at all.
void ScanAllocationClaims(const ObjectGraph& graph, const std::vector<GlobalRef>& globals, const std::string& where,
                          uint64_t source_bytes, std::vector<Finding>& findings);

// Findings about the pickle's shape (lib/torch/pickle_structure.cc): its
// anomalies (pickle-tampered, error), an object tree more than 64 objects per
// byte of `source_bytes` and 2^24 in all (pickle-expansion, error), an object
// that contains itself (pickle-cycle, info: torch 1.13's OneCycleLR state does).
void ScanPickleStructure(const PickleResult& parsed, const std::string& where, uint64_t source_bytes,
                         std::vector<Finding>& findings);

// A read that stopped at one of the built-in PickleLimits (resource-limit,
// error); nothing when the limits were changed or the stop was another error.
void ScanLimitStop(const Status& stop, const PickleLimits& limits, const std::string& where,
                   std::vector<Finding>& findings);

// Offsets of the GLOBAL opcodes whose globals the graph calls (REDUCE, NEWOBJ,
// INST, OBJ, ...), passes as a direct argument to a call, or changes in place
// (BUILD, SETITEM(S), APPEND(S) on the global itself).
std::set<uint64_t> CalledGlobalOffsets(const ObjectGraph& graph);

// Reads the pickle at `cursor` and adds the findings for the globals it names
// and calls, including those before a break (CPython has run them by then).
// Returns the read's status; `got`, when given, receives what was built.
// `mode`: how torch.load feeds it these bytes (kFileNoPeek for a zip's data.pkl).
Status ScanPickleGlobals(ByteCursor& cursor, const std::string& where, const PickleLimits& limits,
                         std::vector<Finding>& findings, PickleResult* got = nullptr,
                         PickleReadMode mode = PickleReadMode::kStream);

// A zip entry name that would leave the directory an extracting tool writes
// into ("..", absolute paths, drive letters): optstate never extracts by name,
// but `unzip` or a careless script would.
void ScanZipName(std::string_view name, std::vector<Finding>& findings);

// Parses (never runs) every bytes value in the graph that looks like a pickle
// and reports its globals, recursing up to `max_depth` levels of nesting.
void ScanNestedPickles(const ObjectGraph& graph, const PickleLimits& limits, uint32_t max_depth,
                       std::vector<Finding>& findings);


// ScanWhatTorchLoadWouldRunOf (optstate/checkpoint.h) for bytes already in memory.
UnreadableScan ScanWhatTorchLoadWouldRun(const ByteCursor& file, const PickleLimits& limits);

}  // namespace optstate

#endif  // OPTSTATE_TORCH_SECURITY_H_
