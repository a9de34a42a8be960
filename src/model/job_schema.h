// The job document's field tables: for each section, the fields memtune uses, how each is
// read from YAML into a JobSpec (the declared job), written back from the effective Job (for
// `memtune job`), and which defaults change memory. One table serves the parser, the emitter and
// the did-you-mean lists. Private to src/model.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "memtune/core/result.h"
#include "memtune/model/job.h"
#include "memtune/model/job_spec.h"
#include "model/job_values.h"

namespace memtune::model::internal {

using Json = nlohmann::ordered_json;

struct SectionSpec;

using ReadFn =
    std::function<Status(const YAML::Node& node, const std::string& path, JobSpec& spec)>;
using WriteFn = std::function<Json(const Job& job)>;

// One field of a section.
struct FieldSpec {
  FieldSpec(std::string field_name, ReadFn read_fn, WriteFn write_fn)
      : name(std::move(field_name)), read(std::move(read_fn)), write(std::move(write_fn)) {}

  std::string name;
  // Reads a present node (non-null, or null when null_is_value) into the spec.
  ReadFn read;
  // The effective value, for output. Empty for aliases and read-only spellings.
  WriteFn write;
  // Non-null: the default changes memory; the text says where it comes from
  // ("4 * hidden_size", "MCore TransformerConfig"). Listed in JobDocument::defaults_used.
  const char* memory_default = nullptr;
  // When the default matters (e.g. MoE fields only for MoE models); null = always.
  bool (*relevant)(const Job& job) = nullptr;
  // Optional fields: an explicit null means None (a value), not "absent".
  bool null_is_value = false;
  // A nested section (memtune.fsdp2): read and written by its own table.
  const SectionSpec* subsection = nullptr;
  // For a second spelling (dataset.sequence_length): the field it sets. Aliases are not
  // written and never count as defaulted.
  std::string alias_of;
};

// One section ("model", "memtune.fsdp2").
struct SectionSpec {
  SectionSpec(std::string section_path, std::vector<FieldSpec> section_fields,
              bool strict_fields = false, std::vector<std::string> quiet = {})
      : path(std::move(section_path)),
        fields(std::move(section_fields)),
        strict(strict_fields),
        quiet_unused(std::move(quiet)) {}

  std::string path;
  std::vector<FieldSpec> fields;
  bool strict = false;  // unknown fields are errors (memtune sections), else ignored
  // Upstream fields memtune does not use whose names are near one it uses: ignored without
  // a did-you-mean warning (e.g. model.fp4_recipe is not a typo of fp8_recipe).
  std::vector<std::string> quiet_unused;
};

// The section tables: model, train, optimizer, ddp, dataset, memtune, peft.
// (mixed_precision has its own reader: job_precision.cc.)
const SectionSpec& ModelTable();
const SectionSpec& TrainTable();
const SectionSpec& OptimizerTable();
const SectionSpec& DdpTable();
const SectionSpec& DatasetTable();
const SectionSpec& MemtuneTable();
const SectionSpec& Fsdp2Table();     // memtune.fsdp2
const SectionSpec& VersionsTable();  // memtune.versions
const SectionSpec& PeftTable();

// Largest values the document accepts (shared with ResolveJob's range checks).
constexpr std::int64_t kMaxLayers = 100'000;
constexpr std::int64_t kMaxParallel = 100'000;     // any one parallel size
constexpr std::int64_t kMaxBatch = 1'000'000'000;  // sequences
constexpr std::int64_t kMaxWorld = 1'000'000;      // GPUs
constexpr std::int64_t kMaxDim = 10'000'000;       // hidden/ffn/head sizes, elements
constexpr std::int64_t kMaxHeads = 100'000;
constexpr std::int64_t kMaxVocab = 100'000'000;      // tokens
constexpr std::int64_t kMaxSeqTokens = 100'000'000;  // tokens

// Field builders over one config struct S that the spec and the job share (ModelBase,
// OptimizerConfig, ...), reached from a JobSpec by `get` (reads) and a Job by `cget` (writes).
template <typename S>
struct Binder {
  S& (*get)(JobSpec&);
  const S& (*cget)(const Job&);

  FieldSpec Int(const char* name, std::int64_t S::*member, std::int64_t lo, std::int64_t hi) const {
    auto g = get;
    auto c = cget;
    return {name,
            [g, member, lo, hi](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
              MEMTUNE_TRY(g(j).*member, ToInt(n, p, lo, hi));
              return OkStatus();
            },
            [c, member](const Job& j) { return Json(c(j).*member); }};
  }
  FieldSpec Int(const char* name, int S::*member, std::int64_t lo, std::int64_t hi) const {
    auto g = get;
    auto c = cget;
    return {name,
            [g, member, lo, hi](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
              MEMTUNE_TRY(const std::int64_t v, ToInt(n, p, lo, hi));
              g(j).*member = static_cast<int>(v);
              return OkStatus();
            },
            [c, member](const Job& j) { return Json(c(j).*member); }};
  }
  template <typename T>
  FieldSpec OptInt(const char* name, std::optional<T> S::*member, std::int64_t lo,
                   std::int64_t hi) const {
    auto g = get;
    auto c = cget;
    FieldSpec f{
        name,
        [g, member, lo, hi](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
          if (n.IsNull()) {
            (g(j).*member).reset();
            return OkStatus();
          }
          MEMTUNE_TRY(const std::int64_t v, ToInt(n, p, lo, hi));
          g(j).*member = static_cast<T>(v);
          return OkStatus();
        },
        [c, member](const Job& j) {
          const auto& v = c(j).*member;
          return v ? Json(*v) : Json(nullptr);
        }};
    f.null_is_value = true;
    return f;
  }
  FieldSpec Bool(const char* name, bool S::*member) const {
    auto g = get;
    auto c = cget;
    return {name,
            [g, member](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
              MEMTUNE_TRY(g(j).*member, ToBool(n, p));
              return OkStatus();
            },
            [c, member](const Job& j) { return Json(c(j).*member); }};
  }
  FieldSpec Double(const char* name, double S::*member, double lo, double hi) const {
    auto g = get;
    auto c = cget;
    return {name,
            [g, member, lo, hi](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
              MEMTUNE_TRY(g(j).*member, ToDouble(n, p, lo, hi));
              return OkStatus();
            },
            [c, member](const Job& j) { return Json(c(j).*member); }};
  }
  FieldSpec OptDouble(const char* name, std::optional<double> S::*member, double lo,
                      double hi) const {
    auto g = get;
    auto c = cget;
    FieldSpec f{
        name,
        [g, member, lo, hi](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
          if (n.IsNull()) {
            (g(j).*member).reset();
            return OkStatus();
          }
          MEMTUNE_TRY(g(j).*member, ToDouble(n, p, lo, hi));
          return OkStatus();
        },
        [c, member](const Job& j) {
          const auto& v = c(j).*member;
          return v ? Json(*v) : Json(nullptr);
        }};
    f.null_is_value = true;
    return f;
  }
  FieldSpec OptBool(const char* name, std::optional<bool> S::*member) const {
    auto g = get;
    auto c = cget;
    FieldSpec f{name,
                [g, member](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
                  if (n.IsNull()) {
                    (g(j).*member).reset();
                    return OkStatus();
                  }
                  MEMTUNE_TRY(g(j).*member, ToBool(n, p));
                  return OkStatus();
                },
                [c, member](const Job& j) {
                  const auto& v = c(j).*member;
                  return v ? Json(*v) : Json(nullptr);
                }};
    f.null_is_value = true;
    return f;
  }
  // Free text; "" is written as null (absent).
  FieldSpec Text(const char* name, std::string S::*member) const {
    auto g = get;
    auto c = cget;
    return {name,
            [g, member](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
              MEMTUNE_TRY(g(j).*member, ToName(n, p));
              return OkStatus();
            },
            [c, member](const Job& j) {
              const std::string& v = c(j).*member;
              return v.empty() ? Json(nullptr) : Json(v);
            }};
  }
  // A C++ enum, spelled as in `names` (name, value); null reads as `null_value` when given.
  template <typename E>
  FieldSpec Choice(const char* name, E S::*member,
                   std::vector<std::pair<std::string, std::type_identity_t<E>>> names,
                   std::optional<std::type_identity_t<E>> null_value = std::nullopt) const {
    auto g = get;
    auto c = cget;
    std::vector<std::string> allowed;
    for (const auto& entry : names) allowed.push_back(entry.first);
    FieldSpec f{name,
                [g, member, names, allowed, null_value](const YAML::Node& n, const std::string& p,
                                                        JobSpec& j) -> Status {
                  if (n.IsNull()) {
                    g(j).*member = *null_value;
                    return OkStatus();
                  }
                  MEMTUNE_TRY(const std::string v, ToEnum(n, p, allowed));
                  for (const auto& entry : names) {
                    if (entry.first == v) g(j).*member = entry.second;
                  }
                  return OkStatus();
                },
                [c, member, names, null_value](const Job& j) {
                  if (null_value && c(j).*member == *null_value) return Json(nullptr);
                  for (const auto& entry : names) {
                    if (entry.second == c(j).*member) return Json(entry.first);
                  }
                  return Json(nullptr);
                }};
    f.null_is_value = null_value.has_value();
    return f;
  }
  // A closed-set enum spelled by its name table (EnumNames in memtune/model/job.h).
  template <typename E>
  FieldSpec Named(const char* name, E S::*member) const {
    std::vector<std::pair<std::string, E>> names;
    for (const EnumName<E>& entry : EnumNames(E{})) names.emplace_back(entry.name, entry.value);
    return Choice(name, member, std::move(names));
  }
  // The same, where null is a value: it reads as, and is written for, `null_value`.
  template <typename E>
  FieldSpec NamedOrNull(const char* name, E S::*member, E null_value) const {
    std::vector<std::pair<std::string, E>> names;
    for (const EnumName<E>& entry : EnumNames(E{})) names.emplace_back(entry.name, entry.value);
    return Choice(name, member, std::move(names), null_value);
  }
  FieldSpec DtypeField(const char* name, Dtype S::*member, std::vector<Dtype> allowed) const {
    auto g = get;
    auto c = cget;
    return {name,
            [g, member, allowed](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
              MEMTUNE_TRY(g(j).*member, ToDtype(n, p, allowed));
              return OkStatus();
            },
            [c, member](const Job& j) { return Json(DtypeName(c(j).*member)); }};
  }
  FieldSpec Names(const char* name, std::vector<std::string> S::*member,
                  std::vector<std::string> allowed = {}) const {
    auto g = get;
    auto c = cget;
    return {name,
            [g, member, allowed](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
              MEMTUNE_TRY(g(j).*member, ToNameList(n, p, allowed));
              return OkStatus();
            },
            [c, member](const Job& j) { return Json(c(j).*member); }};
  }
};

// Builders for the derived fields: read into the spec's optional (Spec, e.g. ModelSpec),
// written from the job's resolved value (Eff, e.g. ModelConfig).
template <typename Spec, typename Eff>
struct DerivedBinder {
  Spec& (*get)(JobSpec&);
  const Eff& (*cget)(const Job&);

  template <typename T>
  FieldSpec Int(const char* name, std::optional<T> Spec::*declared, T Eff::*effective,
                std::int64_t lo, std::int64_t hi) const {
    auto g = get;
    auto c = cget;
    return {name,
            [g, declared, lo, hi](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
              MEMTUNE_TRY(const std::int64_t v, ToInt(n, p, lo, hi));
              g(j).*declared = static_cast<T>(v);
              return OkStatus();
            },
            [c, effective](const Job& j) { return Json(c(j).*effective); }};
  }
  // An Optional[int] field whose absence means "derive": null is an explicit None.
  FieldSpec OptInt(const char* name, std::optional<std::optional<std::int64_t>> Spec::*declared,
                   std::optional<std::int64_t> Eff::*effective, std::int64_t lo,
                   std::int64_t hi) const {
    auto g = get;
    auto c = cget;
    FieldSpec f{
        name,
        [g, declared, lo, hi](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
          if (n.IsNull()) {
            g(j).*declared = std::optional<std::int64_t>();
            return OkStatus();
          }
          MEMTUNE_TRY(const std::int64_t v, ToInt(n, p, lo, hi));
          g(j).*declared = std::optional<std::int64_t>(v);
          return OkStatus();
        },
        [c, effective](const Job& j) {
          const auto& v = c(j).*effective;
          return v ? Json(*v) : Json(nullptr);
        }};
    f.null_is_value = true;
    return f;
  }
  FieldSpec DtypeField(const char* name, std::optional<Dtype> Spec::*declared,
                       Dtype Eff::*effective, std::vector<Dtype> allowed) const {
    auto g = get;
    auto c = cget;
    return {
        name,
        [g, declared, allowed](const YAML::Node& n, const std::string& p, JobSpec& j) -> Status {
          MEMTUNE_TRY(g(j).*declared, ToDtype(n, p, allowed));
          return OkStatus();
        },
        [c, effective](const Job& j) { return Json(DtypeName(c(j).*effective)); }};
  }
};

// Adds the memory-default note and relevance predicate to a field.
inline FieldSpec Memory(FieldSpec field, const char* note, bool (*relevant)(const Job&) = nullptr) {
  field.memory_default = note;
  field.relevant = relevant;
  return field;
}

// A read-only second spelling of a field (dataset.sequence_length for seq_length).
inline FieldSpec Alias(const char* name, FieldSpec target) {
  target.alias_of = target.name;
  target.name = name;
  target.write = nullptr;
  target.memory_default = nullptr;
  return target;
}

}  // namespace memtune::model::internal
