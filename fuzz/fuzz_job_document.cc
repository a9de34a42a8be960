// Fuzz target: any bytes as the job inputs memtune composes a job from (ComposeJob): a
// YAML/JSON job document or torchtitan TOML, the same bytes as a Megatron-LM launch
// command, and as the config.json a document's model.hf_config names (the read_file
// callback hands the input back). Each must give a JobDocument or an Error, never crash,
// hang or exhaust memory.
#include <cstddef>
#include <cstdint>
#include <string>

#include "memtune/model/job_compose.h"
#include "memtune/model/job_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  memtune::model::ParseOptions options;
  options.source_name = "fuzz.yaml";
  options.read_file = [&text](const std::string&) -> memtune::Result<std::string> { return text; };
  memtune::model::JobInputs document;
  document.document = text;
  (void)memtune::model::ComposeJob(document, options);
  memtune::model::JobInputs args;
  args.megatron_args = text;
  (void)memtune::model::ComposeJob(args, options);
  (void)memtune::model::ParseJobText("model: {hf_config: config.json}\nmemtune: {world_size: 8}\n",
                                     options);
  return 0;
}
