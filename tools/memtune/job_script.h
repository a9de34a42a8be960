// Launch scripts as job inputs: a JOB file that is a bash script, or --megatron-args-file,
// read with model::ReadLaunchScript (memtune/model/launch_script.h) into the Megatron-LM
// command, memtune.env overrides and the world size. The CLI edge: it reads the files.
#pragma once

#include <string>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/model/job_compose.h"

namespace memtune::cli {

// Reads `text`, the script at `path` (`source FILE` reads FILE next to it), with the
// --env NAME=VALUE items of `env` as its variables. Sets `inputs.megatron_args` to the
// training command and appends overrides (origin "script"): memtune.env.NAME for its
// environment, memtune.world_size and memtune.gpus_per_node for the launcher's GPU count.
// The reader's notes go to `notes`.
// Errors: the reader's, with `path` as the field; kInvalidInput naming every variable the
// command uses but the script never sets, with the --env flags that set them as the hint.
Status ReadScriptInput(const std::string& text, const std::string& path,
                       const std::vector<std::string>& env, model::JobInputs& inputs,
                       std::vector<std::string>& notes);

}  // namespace memtune::cli
