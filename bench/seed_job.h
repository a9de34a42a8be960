// The seed case (Llama3-70B FP8 SFT, TP4 PP4 VPP5 DP2 on H100-80GB) parsed from the built-in
// example, for the benchmark programs; aborts when it does not parse.
#pragma once

#include <cstdlib>
#include <iostream>

#include "memtune/model/examples.h"
#include "memtune/model/job_parse.h"

namespace memtune::bench {

inline model::Job SeedJob() {
  auto text = model::ExampleJobYaml("llama3-70b-32xh100");
  if (!text) std::abort();
  auto doc = model::ParseJobText(*text);
  if (!doc) {
    std::cerr << "seed job: " << doc.error().Describe() << "\n";
    std::abort();
  }
  return doc->job;
}

}  // namespace memtune::bench
