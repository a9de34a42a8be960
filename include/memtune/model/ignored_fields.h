// Inputs memtune accepts but does not model, classified by whether they change memory.
//
// A Megatron-LM flag or a Bridge field memtune does not read is never an error: most
// (learning rate, logging, checkpointing) have no effect on memory. The ones that do are
// listed here with their effect, and a job that sets one gets a visible warning
// (ComposeJob adds it to JobDocument::warnings), so no figure is silently wrong. Every
// other ignored input is listed under --verbose. docs/ignored-fields.md is generated from
// this table (`memtune job --list-ignored`, checked by tests/python/test_ignored_doc.py).
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace memtune::model {

struct IgnoredInput {
  const char* name;      // "--empty-unused-memory-level", a prefix ending in '*'
                         // ("--inference-*"), or a Bridge field path ("model.moe_router_dtype")
  bool memory_relevant;  // changes what a rank holds; memtune's figure leaves it out
  const char* effect;    // what it changes (or why it does not), with the upstream source
};

// The table, Megatron-LM flags first, then Bridge fields, each group sorted by name.
std::span<const IgnoredInput> IgnoredInputs();

// The entry for an ignored input as the parser names it ("--lr", "--lr=3e-4",
// "model.moe_router_dtype"), or nullptr when the table does not classify it.
const IgnoredInput* FindIgnoredInput(std::string_view name);

// The table as Markdown (docs/ignored-fields.md): | input | memory | effect |.
std::string IgnoredInputsMarkdown();

}  // namespace memtune::model
