// memtune._core: the Python extension. It runs the CLI's command table (tools/memtune/cli.h)
// with the standard streams captured, so every Python call renders the same report, with the
// same numbers and error text, as the `memtune` binary; memtune/*.py turns that into objects.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cli.h"

namespace py = pybind11;

namespace {

// Points `stream` at `buffer` until destroyed.
class Redirect {
 public:
  Redirect(std::ios& stream, std::streambuf* buffer)
      : stream_(stream), old_(stream.rdbuf(buffer)) {}
  ~Redirect() { stream_.rdbuf(old_); }
  Redirect(const Redirect&) = delete;
  Redirect& operator=(const Redirect&) = delete;

 private:
  std::ios& stream_;
  std::streambuf* old_;
};

const char* CodeName(memtune::ErrorCode code) {
  switch (code) {
    case memtune::ErrorCode::kInvalidInput:
      return "invalid_input";
    case memtune::ErrorCode::kInvalidConfig:
      return "invalid_config";
    case memtune::ErrorCode::kNotFound:
      return "not_found";
    case memtune::ErrorCode::kUnsupported:
      return "unsupported";
    case memtune::ErrorCode::kInternal:
      return "internal";
  }
  return "internal";
}

int Run(const std::vector<std::string>& args) {
  std::vector<std::string> storage = {"memtune"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  return memtune::cli::RunCli(static_cast<int>(storage.size()), argv.data());
}

using CliResult = std::tuple<int, std::string, std::string, std::optional<py::dict>>;

// run_cli(args, stdin=None, capture=True): see the docstring below.
CliResult RunCliBinding(const std::vector<std::string>& args,
                        const std::optional<std::string>& stdin_text, bool capture) {
  static std::mutex mutex;  // the subcommands share the standard streams
  int code = 0;
  std::ostringstream out;
  std::ostringstream err;
  std::optional<memtune::Error> error;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex);
    std::istringstream in(stdin_text.value_or(""));
    std::optional<Redirect> in_redirect;
    if (stdin_text) in_redirect.emplace(std::cin, in.rdbuf());
    if (capture) {
      Redirect out_redirect(std::cout, out.rdbuf());
      Redirect err_redirect(std::cerr, err.rdbuf());
      code = Run(args);
    } else {
      code = Run(args);
      std::cout.flush();
    }
    error = memtune::cli::LastError();
  }
  std::optional<py::dict> error_dict;
  if (error) {
    error_dict = py::dict(py::arg("code") = CodeName(error->code), py::arg("field") = error->field,
                          py::arg("message") = error->message, py::arg("hint") = error->hint);
  }
  return {code, out.str(), err.str(), error_dict};
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "memtune's C++ library: the memtune command table (use the memtune package)";
  m.def("run_cli", &RunCliBinding, py::arg("args"), py::arg("stdin") = py::none(),
        py::arg("capture") = true,
        R"(Run `memtune ARGS...` in this process.

Returns (exit_code, stdout, stderr, error): the text the binary would print (empty when
capture is False: then it goes to the process's streams) and, when the command reported an
error, a dict with code, field, message and hint. `stdin` is what '-' reads.

Example:
    >>> code, out, err, error = run_cli(["units", "80GiB"])
)");
}
