// optstate._native: the command line run in-process, for the Python package.
//
// The package's functions (optstate/__init__.py) build a command line from
// their arguments and read the --json document it prints: one parser of
// flags, one renderer of documents, so a Python result is the CLI's by
// construction. The work runs on a thread of its own with the GIL released;
// the calling thread checks for signals every 100 ms, and on KeyboardInterrupt
// asks the library to cancel (RequestCancellation: the job fails at its next
// write or block of values, removing its outputs), waits for it, and raises.
// Nothing is printed; both streams come back as bytes.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cli_app.h"
#include "command.h"
#include "optstate/file_io.h"

namespace py = pybind11;

namespace {

// (exit code, stdout, stderr) of `optstate ARGS...`.
std::tuple<int, py::bytes, py::bytes> Run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  std::vector<const char*> argv = {"optstate"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  optstate::ClearCancellation();
  std::promise<int> exit_code;
  std::future<int> done = exit_code.get_future();
  std::thread worker([&] {
    exit_code.set_value(optstate::tools::RunCliFiltered(static_cast<int>(argv.size()), argv.data(), out, err));
  });
  while (true) {
    std::future_status state;
    {
      py::gil_scoped_release release;
      state = done.wait_for(std::chrono::milliseconds(100));
    }
    if (state == std::future_status::ready) break;
    if (PyErr_CheckSignals() != 0) {  // KeyboardInterrupt (or another handler's exception) is pending
      optstate::RequestCancellation();
      {
        py::gil_scoped_release release;
        worker.join();
      }
      optstate::ClearCancellation();
      throw py::error_already_set();
    }
  }
  worker.join();
  int rc = done.get();
  return {rc, py::bytes(out.str()), py::bytes(err.str())};
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "optstate's command line, run in-process (use the functions of the optstate package)";
  m.def("run", &Run, py::arg("args"),
        "Runs `optstate ARGS...` in this process; returns (exit code, stdout bytes, stderr bytes).");
  m.attr("version") = OPTSTATE_VERSION;
}
