// Launch-script reader: the positions lint reads (assignments with their file, line,
// column and relation to the training command; the command's words).
#include <gtest/gtest.h>

#include "memtune/model/launch_script.h"

namespace memtune::model {
namespace {

LaunchScript Read(const std::string& text, ScriptOptions options = {}) {
  auto r = ReadLaunchScript(text, options);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().Describe());
  return r ? *r : LaunchScript{};
}

const ScriptAssignment* Find(const LaunchScript& s, const std::string& name, int line) {
  for (const ScriptAssignment& a : s.assignments) {
    if (a.name == name && a.at.line == line) return &a;
  }
  return nullptr;
}

TEST(LaunchScriptPositions, AssignmentsKnowTheirPlaceAndTheCommand) {
  ScriptOptions options;
  options.file_name = "train.sh";
  const LaunchScript s = Read(
      "X=1\n"
      "  export A=on\n"
      "B=2 echo hi\n"
      "C=3 torchrun pretrain_gpt.py --num-layers $X\n"
      "export D=late\n",
      options);
  EXPECT_EQ(s.command_at.line, 4);
  EXPECT_EQ(s.command_at.column, 5);
  EXPECT_EQ(s.command_at.file, "train.sh");
  const ScriptAssignment* x = Find(s, "X", 1);
  ASSERT_NE(x, nullptr);
  EXPECT_FALSE(x->exported);
  EXPECT_EQ(x->value, "1");
  const ScriptAssignment* a = Find(s, "A", 2);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->exported);
  EXPECT_EQ(a->at.column, 10);
  const ScriptAssignment* b = Find(s, "B", 3);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b->prefix);
  EXPECT_FALSE(b->of_command);
  const ScriptAssignment* c = Find(s, "C", 4);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->of_command);
  EXPECT_FALSE(c->after_command);
  const ScriptAssignment* d = Find(s, "D", 5);
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(d->after_command);
  EXPECT_FALSE(s.env.contains("D"));
}

TEST(LaunchScriptPositions, CommandWordsKeepWhereTheyWereWritten) {
  const LaunchScript s = Read(
      "ARGS=(--num-layers 4)\n"
      "torchrun pretrain_gpt.py \\\n"
      "   --hidden-size 8 ${ARGS[@]}\n");
  ASSERT_EQ(s.words.size(), 6u);
  EXPECT_EQ(s.words[2].text, "--hidden-size");
  EXPECT_EQ(s.words[2].at.line, 3);
  EXPECT_EQ(s.words[2].at.column, 4);
  EXPECT_EQ(s.words[4].text, "--num-layers");
  EXPECT_EQ(s.words[4].raw, "${ARGS[@]}");
  EXPECT_EQ(s.words[4].at.line, 3);
}

TEST(LaunchScriptPositions, ExportOfASetVariableIsRecorded) {
  const LaunchScript s = Read("P=x\nexport P\ntorchrun pretrain_gpt.py --num-layers 2\n");
  const ScriptAssignment* p = Find(s, "P", 2);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->exported);
  EXPECT_EQ(p->value, "x");
  EXPECT_EQ(s.env.at("P"), "x");
}

TEST(LaunchScriptPositions, SourcedAssignmentsNameTheirFile) {
  ScriptOptions options;
  options.file_name = "main.sh";
  options.read_file = [](const std::string&) -> Result<std::string> {
    return std::string("\nexport E=1\n");
  };
  const LaunchScript s = Read("source env.sh\ntorchrun pretrain_gpt.py --num-layers 2\n", options);
  const ScriptAssignment* e = Find(s, "E", 2);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->at.file, "env.sh");
  EXPECT_EQ(s.command_at.file, "main.sh");
}

TEST(LaunchScriptPositions, WithoutACommandWhenNotRequired) {
  ScriptOptions options;
  options.require_command = false;
  const LaunchScript s = Read("export A=1\n", options);
  EXPECT_EQ(s.command_at.line, 0);
  EXPECT_TRUE(s.command.empty());
  ASSERT_EQ(s.assignments.size(), 1u);
  EXPECT_FALSE(s.assignments[0].after_command);
  EXPECT_FALSE(ReadLaunchScript("export A=1\n", {}).has_value());
}

}  // namespace
}  // namespace memtune::model
