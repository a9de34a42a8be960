// memtune units: converts a size between the units memtune and PyTorch print.
#include <iostream>

#include "command.h"
#include "commands.h"
#include "memtune/core/units.h"

namespace memtune::cli {

int RunUnits(int argc, char** argv) {
  CLI::App app("Convert a size to bytes, binary (GiB) and decimal (GB) units.", "memtune units");
  app.footer("Example:\n  memtune units 58.8GB");
  std::string size;
  app.add_option("SIZE", size, "a size such as 80GB, 79.6GiB or 85520809984")->required();
  if (int code = ParseArgs(app, argc, argv); code >= 0) return code;
  auto bytes = ParseBytes(size, "SIZE");
  if (!bytes) return PrintError("units", bytes.error());
  std::cout << FormatWithCommas(*bytes) << " bytes = " << FormatBytesBinary(*bytes) << " = "
            << FormatGB(*bytes) << "\n";
  return kExitOk;
}

}  // namespace memtune::cli
