// Shared CLI plumbing: argument parsing with friendly errors, error lines, --format.
#include "command.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <vector>

#include "cli.h"
#include "memtune/core/elide.h"
#include "memtune/core/suggest.h"

namespace memtune::cli {

CLI::Validator FiniteNumber() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end != text.c_str() && !std::isfinite(value)) {
          return "'" + text + "' is not a finite number; allowed: a number such as 0.9";
        }
        return "";
      },
      "", "finite");
}

void AddFormatOption(CLI::App& app, OutputFormat& format) {
  static const std::map<std::string, OutputFormat> kFormats = {{"text", OutputFormat::kText},
                                                               {"json", OutputFormat::kJson}};
  app.add_option("--format", format, "Output format: text or json (default: text)")
      ->transform(CLI::CheckedTransformer(kFormats, CLI::ignore_case).description(""))
      ->option_text("text|json");
}

namespace {

// The error PrintError reported last (cli.h's LastError).
std::optional<Error>& LastErrorSlot() {
  static std::optional<Error> error;
  return error;
}

std::vector<std::string> OptionNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto& n : opt->get_lnames()) names.push_back("--" + n);
  }
  return names;
}

}  // namespace

int ParseArgs(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    std::string message = e.what();
    std::string hint;
    const std::vector<std::string> known = OptionNames(app);
    for (int i = 1; i < argc && hint.empty(); ++i) {
      const std::string arg = argv[i];
      if (arg.rfind("--", 0) != 0) continue;
      const std::string name = arg.substr(0, arg.find('='));
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        hint = DidYouMean(name, known);
      }
    }
    std::cerr << app.get_name() << ": error: " << message;
    if (!hint.empty()) std::cerr << "; " << hint;
    std::cerr << "\n(run '" << app.get_name() << " --help' for usage)\n";
    return kExitUsage;
  }
  return -1;
}

const std::optional<Error>& LastError() { return LastErrorSlot(); }

void ClearLastError() { LastErrorSlot().reset(); }

int PrintError(std::string_view command, const Error& raw) {
  // One readable line even when the message quotes a huge value from the input.
  const Error error{raw.code, ElideLongWords(raw.field), ElideLongWords(raw.message),
                    ElideLongWords(raw.hint)};
  LastErrorSlot() = error;
  std::string text = error.message;
  if (!error.field.empty() && text.rfind(error.field, 0) != 0) text = error.field + ": " + text;
  std::cerr << "memtune " << command << ": error: " << text;
  if (!error.hint.empty()) std::cerr << "; " << error.hint;
  std::cerr << "\n";
  return error.code == ErrorCode::kInternal ? kExitInternal : kExitUsage;
}

void PrintWarning(std::string_view command, std::string_view text) {
  std::cerr << "memtune " << command << ": warning: " << ElideLongWords(text) << "\n";
}

}  // namespace memtune::cli
