// The job-selecting options every job-taking subcommand shares (JOB file, --example,
// --model, parallel sizes, --set, --megatron-args, ...), and loading the job they name.
// The merging and parsing live in the library (model/job_compose.h); this is the CLI edge.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/model/job_parse.h"

namespace memtune::cli {

// The options as typed. Sizes stay text so that the one parser checks them.
struct JobFlags {
  std::string job_file;  // positional JOB (YAML or JSON; "-" = stdin)
  std::string example;   // --example NAME
  std::string model;     // --model PRESET -> model.preset
  std::string tp, pp, vpp, cp, ep, etp;
  bool sp = false;                 // --sp -> model.sequence_parallel: true
  std::string seq;                 // --seq -> model.seq_length and dataset.seq_length
  std::string mbs, gbs;            // train.micro_batch_size, train.global_batch_size
  std::string world_size;          // memtune.world_size (--world-size, --gpus, --num-gpus)
  std::string precision;           // --precision PRESET -> mixed_precision
  std::string recipe;              // --recipe NAME -> memtune.recipe
  std::string hf_config;           // --hf-config FILE -> model.hf_config
  std::string gpu;                 // memtune.gpu (a name) or memtune.gpu_memory_bytes (a size)
  std::vector<std::string> set;    // --set PATH=VALUE, in order
  std::vector<std::string> env;    // --env NAME=VALUE: memtune.env.NAME, after --set
  std::string megatron_args;       // --megatron-args "..."
  std::string megatron_args_file;  // --megatron-args-file FILE
  bool verbose = false;            // --verbose
};

// How the job file is named: the positional JOB (estimate, check, job) or `--job JOB` (for
// commands whose positionals are other files, e.g. diagnose).
enum class JobFileArg { kPositional, kOption };

// Adds the options above to `app`.
void AddJobOptions(CLI::App& app, JobFlags& flags, JobFileArg job_arg = JobFileArg::kPositional);

// True when the flags name a job (a file, --example, --model or Megatron arguments).
bool NamesJob(const JobFlags& flags);

// Reads the files the flags name and builds the job: document (JOB or --example), then
// --megatron-args, then the flags, then --set (a later input wins).
// Errors: kNotFound for an unreadable file or unknown example; the parser's errors.
Result<model::JobDocument> LoadJob(const JobFlags& flags);

// Prints the parser's warnings ("memtune <command>: warning: ...") and, with `verbose`,
// the defaults it used and the fields it ignored, to stderr.
void PrintJobNotes(std::string_view command, const model::JobDocument& doc, bool verbose);

}  // namespace memtune::cli
