// Inputs memtune accepts but does not model, classified by whether they change memory.
//
// A Megatron-LM flag or a Bridge field memtune does not read is never an error: most
// (learning rate, logging, checkpointing) have no effect on memory. The ones that do are
// listed here with their effect, and a job that sets one gets a visible warning
// (ComposeJob adds it to JobDocument::warnings), so no figure is silently wrong. Every
// other ignored input is listed under --verbose. docs/ignored-fields.md is generated from
// this table (`memtune job --list-ignored`, checked by tests/python/test_ignored_doc.py).
//
// The table classifies every flag of Megatron-LM's argument parser at d98e8a64 that memtune
// does not read, and every Megatron-Bridge ConfigContainer field at 067f987d
// (tests/data/upstream/ holds both lists; ignored_fields_test.cc checks them). A Bridge
// field of a section memtune reads (model, train, optimizer, ddp, dataset, mixed_precision)
// that has no row of its own is classified by the flag of the same name:
// model.fp32_residual_connection by --fp32-residual-connection, and
// model.bias_dropout_fusion by --no-bias-dropout-fusion (negated: the field changes memory
// when it is false).
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace memtune::model {

struct IgnoredInput {
  const char* name;      // "--empty-unused-memory-level", a prefix ending in '*'
                         // ("--inference-*"), a Bridge field path ("model.quant_recipe"),
                         // or a whole Bridge section ("logger")
  bool memory_relevant;  // changes what a rank holds; memtune's figure leaves it out
  const char* effect;    // what it changes (or why it does not), with the upstream source
  const char* inert;     // Bridge values that leave memory as memtune counts it (the
                         // upstream default), '|'-separated; "" when null/false/0 are the
                         // only ones
};

// The table, Megatron-LM flags first, then Bridge fields, each group sorted by name.
std::span<const IgnoredInput> IgnoredInputs();

// How an ignored input is classified: its entry (nullptr when none), and whether a Bridge
// field is the negation of the entry's flag (model.bias_dropout_fusion by
// --no-bias-dropout-fusion).
struct IgnoredMatch {
  const IgnoredInput* entry = nullptr;
  bool negated = false;
};

// The classification of an input as the parser names it ("--lr", "--lr=3e-4",
// "model.quant_recipe", "logger"): an exact row wins over a prefix, a longer prefix over a
// shorter one, a Bridge row over a flag row.
IgnoredMatch ClassifyIgnored(std::string_view name);

// ClassifyIgnored(name).entry.
const IgnoredInput* FindIgnoredInput(std::string_view name);

// The table as Markdown (docs/ignored-fields.md): | input | memory | effect |.
std::string IgnoredInputsMarkdown();

}  // namespace memtune::model
