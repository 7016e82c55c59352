// optstate._native: the command line run in-process, for the Python package.
//
// The package's functions (optstate/__init__.py) build a command line from
// their arguments and read the --json document it prints: one parser of
// flags, one renderer of documents, so a Python result is the CLI's by
// construction. The work runs with the GIL released; nothing is printed,
// both streams come back as bytes.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cli_app.h"
#include "command.h"

namespace py = pybind11;

namespace {

// (exit code, stdout, stderr) of `optstate ARGS...`.
std::tuple<int, py::bytes, py::bytes> Run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int rc;
  {
    py::gil_scoped_release release;
    std::vector<const char*> argv = {"optstate"};
    for (const std::string& a : args) argv.push_back(a.c_str());
    optstate::tools::CommandOutput output{out, err};
    rc = optstate::tools::RunCli(static_cast<int>(argv.size()), argv.data(), output);
  }
  return {rc, py::bytes(out.str()), py::bytes(err.str())};
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "optstate's command line, run in-process (use the functions of the optstate package)";
  m.def("run", &Run, py::arg("args"),
        "Runs `optstate ARGS...` in this process; returns (exit code, stdout bytes, stderr bytes).");
  m.attr("version") = OPTSTATE_VERSION;
}
