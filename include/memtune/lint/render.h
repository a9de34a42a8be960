// Renderers of a lint report and of the rule table: plain data in, text out (nothing here
// prints). JSON is exactly {"findings": [{"rule", "severity", "file", "line", "column",
// "text", "message", "fix", "source"}]} with source = {"repo", "path", "version"}; SARIF is
// version 2.1.0 (OASIS SARIF 2.1.0, sections 3.13 sarifLog, 3.14 run, 3.19 toolComponent,
// 3.27 result, 3.28 location, 3.29 physicalLocation, 3.30 region).
#pragma once

#include <string>

#include "memtune/lint/lint.h"

namespace memtune::lint {

// One block per finding: "FILE:LINE:COL: SEVERITY[RULE]: MESSAGE", the text, fix and
// source lines, then a count line ("1 error, 2 warnings, 0 infos in 3 files").
std::string RenderText(const LintReport& report, int files);

// The JSON document above, 2-space indented, ending in a newline.
std::string RenderJson(const LintReport& report);

// A SARIF 2.1.0 log: one run, tool.driver {name "memtune lint", rules[] of the rules that
// fired}, results[] {ruleId, level (error|warning|note), message.text, locations[]} (a
// finding without a line gets a location without a region).
std::string RenderSarif(const LintReport& report);

// The rule table (lint rules, then check.<id> rules) as docs/lint-rules.md, as text
// (one line per rule) and as JSON {"rules": [...]}.
std::string RenderRulesMarkdown();
std::string RenderRulesText();
std::string RenderRulesJson();

}  // namespace memtune::lint
