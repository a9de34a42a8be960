// Fuzz target: any bytes through the launch-script reader, with a read_file callback that
// hands back the input itself (so `source` recursion is exercised). Each input must return
// an error or a LaunchScript, never crash, hang or exhaust memory.
#include <cstddef>
#include <cstdint>
#include <string>

#include "memtune/model/launch_script.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  memtune::model::ScriptOptions options;
  options.variables = {{"FIXED", "1"}};
  options.read_file = [&text](const std::string&) -> memtune::Result<std::string> { return text; };
  auto script = memtune::model::ReadLaunchScript(text, options);
  (void)script;
  (void)memtune::model::LooksLikeLaunchScript(text);
  return 0;
}
