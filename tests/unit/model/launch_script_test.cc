// Launch-script reader: each static bash form, the command finder, GPU counts and hostile
// input (deep nesting, huge expansion, unterminated constructs, $(...) never run).
#include "memtune/model/launch_script.h"

#include <gtest/gtest.h>

#include <fstream>

#include "model/launch_script_internal.h"

namespace memtune::model {
namespace {

constexpr const char* kRun = "torchrun --nproc_per_node 8 pretrain_gpt.py ";

LaunchScript Read(const std::string& text, ScriptOptions options = {}) {
  auto r = ReadLaunchScript(text, options);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().Describe());
  return r ? *r : LaunchScript{};
}

// The training command after "pretrain_gpt.py ".
std::string Args(const std::string& text, ScriptOptions options = {}) {
  const std::string command = Read(text, std::move(options)).command;
  const std::size_t at = command.find("pretrain_gpt.py");
  return at == std::string::npos ? command : command.substr(at + 16);
}

Error Fail(const std::string& text, ScriptOptions options = {}) {
  auto r = ReadLaunchScript(text, options);
  EXPECT_FALSE(r.has_value());
  return r ? Error{} : r.error();
}

std::vector<std::string> Names(const LaunchScript& s) {
  std::vector<std::string> out;
  for (const UnresolvedVariable& u : s.unresolved)
    out.push_back(u.name + ":" + std::to_string(u.line));
  return out;
}

bool HasNote(const LaunchScript& s, const std::string& part) {
  for (const std::string& n : s.notes) {
    if (n.find(part) != std::string::npos) return true;
  }
  return false;
}

TEST(LaunchScriptTest, CommentsContinuationsAndQuotes) {
  EXPECT_EQ(Args(std::string("# a comment\n") + kRun +
                 "\\\n  --num-layers 4 \\\n"
                 "  --data-path 'a b' \"c\\\"d\" e\\ f # trailing\n"),
            "--num-layers 4 --data-path 'a b' 'c\"d' 'e f'");
}

TEST(LaunchScriptTest, VariablesAndDefaults) {
  const std::string text = std::string("L=4\nexport H=${H:-256}\ndeclare S=\"${S-128}\"\n") +
                           "local N=${NN:=2}\nE=${EMPTY:-x}${EMPTY-y}\nEMPTY=\n" + kRun +
                           "--num-layers $L --hidden-size ${H} --seq-length $S --n $N --e $E "
                           "--z ${EMPTY:-z}${EMPTY-w} --plus ${L:+set}\n";
  EXPECT_EQ(Args(text),
            "--num-layers 4 --hidden-size 256 --seq-length 128 --n 2 --e xy --z z "
            "--plus set");
  EXPECT_EQ(Read(text).env, (std::map<std::string, std::string>{{"H", "256"}}));
}

TEST(LaunchScriptTest, CallerVariablesWin) {
  ScriptOptions options;
  options.variables = {{"L", "80"}, {"1", "/ckpt"}};
  EXPECT_EQ(Args(std::string("L=4\n") + kRun + "--num-layers $L --save $1\n", options),
            "--num-layers 80 --save /ckpt");
}

TEST(LaunchScriptTest, Arrays) {
  const std::string text = std::string("A=(\n  --num-layers 4  # layers\n  --swiglu\n)\n") +
                           "A+=(--hidden-size 64)\nB=(\"x y\" z)\n" + kRun +
                           "${A[@]} --q \"${B[@]}\" --r ${B[*]} --s \"${B[*]}\" --t ${B[1]} "
                           "--u $B --n ${#B[@]}\n";
  EXPECT_EQ(Args(text),
            "--num-layers 4 --swiglu --hidden-size 64 --q 'x y' z --r x y z "
            "--s 'x y z' --t z --u x y --n 2");
}

TEST(LaunchScriptTest, Arithmetic) {
  const std::string text = std::string("G=8\nN=2\nW=$(($G*$N))\nM=$(( (W + 2) / 3 % 4 - -1 ))\n") +
                           kRun + "--w $W --m $M --x $((N*G))\n";
  EXPECT_EQ(Args(text), "--w 16 --m 3 --x 16");
  const LaunchScript s = Read(std::string("X=$((1/0))\n") + kRun + "--x $X\n");
  EXPECT_EQ(Names(s), std::vector<std::string>{"X:1"});
  EXPECT_TRUE(HasNote(s, "division by zero")) << s.notes[0];
  EXPECT_EQ(Names(Read(std::string("Y=$((99999999999999999999))\n") + kRun + "--y $Y\n")),
            std::vector<std::string>{"Y:1"});
}

TEST(LaunchScriptTest, IfBlocksReadStraightThrough) {
  const LaunchScript s = Read(std::string("if [[ \"$X\" == 1 ]]; then\n  L=2\nelse\n  L=3\nfi\n") +
                              kRun + "--num-layers $L\n");
  EXPECT_TRUE(s.command.ends_with("--num-layers 3"));
  EXPECT_TRUE(HasNote(s, "if/fi block read straight through (line 1)"));
}

TEST(LaunchScriptTest, SourceThroughCallback) {
  std::vector<std::string> asked;
  ScriptOptions options;
  options.read_file = [&](const std::string& path) -> Result<std::string> {
    asked.push_back(path);
    if (path == "common.sh") return std::string("L=6\nexport NCCL_X=1\n");
    return NotFound("file", "no such file");
  };
  const LaunchScript s =
      Read(std::string("D=.\nsource common.sh\n. $D/missing.sh\n") + kRun + "--num-layers $L\n",
           options);
  EXPECT_EQ(asked, (std::vector<std::string>{"common.sh", "./missing.sh"}));
  EXPECT_TRUE(s.command.ends_with("--num-layers 6"));
  EXPECT_EQ(s.env.at("NCCL_X"), "1");
  EXPECT_TRUE(HasNote(s, "source ./missing.sh not read"));
  // Without a callback, sourcing is reported and its variables come out unresolved.
  const LaunchScript alone = Read(std::string("source common.sh\n") + kRun + "--num-layers $L\n");
  EXPECT_TRUE(HasNote(alone, "source common.sh not read (line 1)"));
  EXPECT_EQ(Names(alone), std::vector<std::string>{"L:2"});
}

TEST(LaunchScriptTest, SourceLoopIsBounded) {
  ScriptOptions options;
  options.read_file = [](const std::string&) -> Result<std::string> {
    return std::string("source self.sh\n");
  };
  EXPECT_EQ(Fail("source self.sh\n", options).message,
            "source nested deeper than 32 levels (line 1)");
}

TEST(LaunchScriptTest, SbatchHeredocAndDirectives) {
  const LaunchScript s = Read(
      "#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --gpus-per-node=8\ncat > notes.txt <<EOF\n"
      "torchrun pretrain_gpt.py --num-layers 1\nEOF\nsbatch <<-'EOT'\n\tL=12\n"
      "\tsrun python pretrain_gpt.py --num-layers $L --nodes-seen $SLURM_NNODES\n\tEOT\n");
  EXPECT_EQ(s.command, "srun python pretrain_gpt.py --num-layers 12 --nodes-seen 4");
  EXPECT_EQ(s.nnodes, 4);
  EXPECT_EQ(s.nproc_per_node, 8);
  // Lines inside a heredoc count from the script's top.
  EXPECT_EQ(Names(Read("\nsbatch <<EOF\n\npython pretrain_gpt.py --a $X\nEOF\n")),
            std::vector<std::string>{"X:4"});
  EXPECT_EQ(Fail("<<EOF\nx\nEOF\n").message.substr(0, 26), "no training command found:");
}

TEST(LaunchScriptTest, UnquotedHeredocBackslashes) {
  const LaunchScript s = Read(
      "L=3\nsbatch <<EOF\nM=\\$((L + 1))\npython pretrain_gpt.py --a $L --b \\$M \\\n --c "
      "1\nEOF\n");
  EXPECT_EQ(s.command, "python pretrain_gpt.py --a 3 --b 4 --c 1");
}

TEST(LaunchScriptTest, ScriptFolderSubstitution) {
  std::vector<std::string> asked;
  ScriptOptions options;
  options.read_file = [&](const std::string& path) -> Result<std::string> {
    asked.push_back(path);
    return std::string("L=2\n");
  };
  const LaunchScript s = Read(
      "DIR=\"$(cd \"$(dirname \"${BASH_SOURCE[0]}\")\" &> /dev/null && pwd)\"\n"
      "source \"$(dirname \"$0\")/a.sh\"\nsource $DIR/b.sh\n" +
          std::string(kRun) + "--l $L\n",
      options);
  EXPECT_EQ(asked, (std::vector<std::string>{"./a.sh", "./b.sh"}));
  EXPECT_TRUE(s.unresolved.empty());
  EXPECT_TRUE(HasNote(s, "read as the script's folder (line 1)"));
}

TEST(LaunchScriptTest, LauncherCounts) {
  LaunchScript s = Read("torchrun --nnodes=2 --nproc-per-node=4 pretrain_gpt.py\n");
  EXPECT_EQ(s.nnodes, 2);
  EXPECT_EQ(s.nproc_per_node, 4);
  s = Read("srun -N3 --ntasks-per-node 8 python train.py --num-layers 2\n");
  EXPECT_EQ(s.nnodes, 3);
  EXPECT_EQ(s.nproc_per_node, 8);
  s = Read("deepspeed --num_nodes 2 --num_gpus 8 pretrain_gpt.py --deepspeed\n");
  EXPECT_EQ(s.nnodes, 2);
  EXPECT_EQ(s.nproc_per_node, 8);
  s = Read("python -m torch.distributed.run --nproc_per_node 2 pretrain_bert.py\n");
  EXPECT_EQ(s.nproc_per_node, 2);
  EXPECT_FALSE(s.nnodes.has_value());
}

TEST(LaunchScriptTest, LastTrainingCommandAndPrefixEnv) {
  const LaunchScript s = Read(
      "export CUDA_DEVICE_MAX_CONNECTIONS=1\npython tools/preprocess.py input\n"
      "torchrun pretrain_gpt.py --num-layers 1 2>&1 | tee log.txt\n"
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True env NCCL_A=0 python train.py "
      "--num-layers 2 > out.log &\necho done\n");
  EXPECT_EQ(s.command, "python train.py --num-layers 2");
  EXPECT_EQ(s.env, (std::map<std::string, std::string>{
                       {"CUDA_DEVICE_MAX_CONNECTIONS", "1"},
                       {"NCCL_A", "0"},
                       {"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"}}));
}

TEST(LaunchScriptTest, CommandInAVariableAndEval) {
  EXPECT_EQ(Read("L=2\nCMD=\"torchrun pretrain_gpt.py --num-layers $L\"\n$CMD\n").command,
            "torchrun pretrain_gpt.py --num-layers 2");
  EXPECT_EQ(Read("C=\"python train.py --data-path 'a b' --n 1\"\neval \"$C\"\n").command,
            "python train.py --data-path 'a b' --n 1");
}

TEST(LaunchScriptTest, WrappersAndShellStrings) {
  EXPECT_EQ(
      Read("nsys profile -o out uv run python -m torch.distributed.run pretrain_gpt.py\n").command,
      "nsys profile -o out uv run python -m torch.distributed.run pretrain_gpt.py");
  EXPECT_EQ(Read("echo torchrun pretrain_gpt.py --a 1\ntorchrun pretrain_gpt.py --a 2\n"
                 "echo torchrun pretrain_gpt.py --a 3\n")
                .command,
            "torchrun pretrain_gpt.py --a 2");
  EXPECT_EQ(
      Read("CMD=\"cd /x; python pretrain_gpt.py --a 1\"\nsrun -N 2 bash -x -c \"$CMD\"\n").command,
      "python pretrain_gpt.py --a 1");
  const LaunchScript s = Read(std::string(kRun) + "--save $PWD/ckpt --seed $RANDOM\n");
  EXPECT_TRUE(s.unresolved.empty());
  EXPECT_TRUE(s.command.ends_with("--save ./ckpt --seed 0"));
  EXPECT_TRUE(HasNote(s, "$PWD taken as '.'"));
  EXPECT_EQ(Names(Read("D=`uname`\n" + std::string(kRun) + "--d $D\n")),
            std::vector<std::string>{"D:1"});
}

TEST(LaunchScriptTest, UnresolvedVariablesNamed) {
  const LaunchScript s = Read(std::string("CKPT=$1\nHOST=$(hostname)\nexport MASTER=`hostname`\n") +
                              "torchrun --master_addr $HOST --nnodes $NN pretrain_gpt.py "
                              "--num-layers $NUM_LAYERS --save $CKPT --data $(ls data)\n");
  EXPECT_EQ(Names(s), (std::vector<std::string>{"NN:4", "NUM_LAYERS:4", "1:1", "$(ls data):4"}));
  EXPECT_TRUE(HasNote(s, "$(hostname) not expanded (line 2)"));
  EXPECT_TRUE(
      HasNote(s, "HOST not expanded: a launcher option memory does not depend on (line 2)"));
  EXPECT_FALSE(s.env.contains("MASTER"));
  EXPECT_EQ(s.command.find('$'), std::string::npos);
}

TEST(LaunchScriptTest, CommandSubstitutionIsNeverRun) {
  // Would create a file if run; the reader only reports it.
  const LaunchScript s = Read(std::string("X=$(touch /tmp/memtune_never_run)\n") + kRun +
                              "--x \"$(touch /tmp/memtune_never_run)\"\n");
  EXPECT_FALSE(std::ifstream("/tmp/memtune_never_run").good());
  EXPECT_EQ(s.unresolved.size(), 1u);
}

TEST(LaunchScriptTest, NoTrainingCommand) {
  EXPECT_EQ(Fail("echo hi\npython tools/preprocess.py in\n").Describe().substr(0, 34),
            "JOB: no training command found: lo");
}

TEST(LaunchScriptTest, HostileInput) {
  EXPECT_EQ(Fail(std::string((1 << 20) + 1, '#')).message, "script larger than 1 MiB");
  std::string nested = "X=";
  for (int i = 0; i < 40; ++i) nested += "${A:-";
  nested += "x" + std::string(40, '}') + "\n";
  EXPECT_EQ(Fail(nested).message, "expansion nested deeper than 32 levels");
  std::string doubling = "A=xxxxxxxxxxxxxxxx\n";
  for (int i = 0; i < 15; ++i) doubling += "A=$A$A\n";  // 512 KiB
  EXPECT_EQ(Fail(doubling + "A=$A$A$A\n").message, "expansion larger than 1 MiB");
  EXPECT_EQ(Fail(doubling + kRun + "$A$A$A\n").message, "expansion larger than 1 MiB");
  std::string array = "A=(x)\n";
  for (int i = 0; i < 30; ++i) array += "A+=(\"${A[@]}\")\n";
  EXPECT_EQ(Fail(array).message, "A grows larger than 1 MiB");
  std::string parens = "X=$((" + std::string(100, '(') + "1" + std::string(100, ')') + "))\n";
  EXPECT_TRUE(HasNote(Read(parens + kRun + "\n"), "deeper than 32"));
}

// Inputs that would take quadratic or exponential time without the limits; each must
// finish at once (ctest's timeout would catch a hang).
TEST(LaunchScriptTest, HostileInputIsBounded) {
  std::string notes, appends;
  for (int i = 0; i < 50000; ++i) notes += "A=$(x)$A$B\n";
  const LaunchScript s = Read(notes + kRun + "--a $A\n");
  EXPECT_EQ(s.notes.size(), 51u);  // 50 kept, then "49950 more notes"
  EXPECT_EQ(s.notes.back(), "49950 more notes");
  EXPECT_LE(s.unresolved.size(), 50u);
  for (int i = 0; i < 100000; ++i) appends += "A+=(x)\n";
  EXPECT_TRUE(Read(appends + kRun + "\n").command.ends_with("pretrain_gpt.py"));
  ScriptOptions twice;
  twice.read_file = [](const std::string& path) -> Result<std::string> {
    return std::string(path == "a.sh" ? "source a.sh\nsource a.sh\n" : "");
  };
  EXPECT_EQ(Fail("source a.sh\n", twice).message, "source nested deeper than 32 levels (line 1)");
  std::string many;
  for (int i = 0; i < 300; ++i) many += "source b.sh\n";
  EXPECT_EQ(Fail(many, twice).message, "more than 256 files sourced (line 257)");
}

TEST(LaunchScriptTest, Unterminated) {
  EXPECT_EQ(Fail("A='x\n").Describe(), "line 1: unterminated ' quote");
  EXPECT_EQ(Fail("A=\"x\n").Describe(), "line 1: unterminated \"");
  EXPECT_EQ(Fail("A=(x\ny\n").Describe(), "line 1: unterminated array 'A=('");
  EXPECT_EQ(Fail("cat <<EOF\nbody\n").Describe(), "line 1: unterminated heredoc 'EOF'");
  EXPECT_EQ(Fail("A=$(echo\n").Describe(), "line 1: unterminated $(");
  EXPECT_EQ(Fail("A=${X\n").Describe(), "line 1: unterminated ${");
}

TEST(LaunchScriptTest, LooksLikeLaunchScript) {
  EXPECT_TRUE(LooksLikeLaunchScript("#!/bin/bash\n"));
  EXPECT_TRUE(LooksLikeLaunchScript("X=1\ntorchrun a.py\n"));
  EXPECT_TRUE(LooksLikeLaunchScript("python pretrain_gpt.py --num-layers 2\n"));
  EXPECT_FALSE(LooksLikeLaunchScript("model:\n  preset: llama3-8b\n"));
  EXPECT_FALSE(LooksLikeLaunchScript("{\"model\": {\"num_layers\": 2}}"));
  EXPECT_FALSE(LooksLikeLaunchScript("python: 3\n"));
  EXPECT_FALSE(LooksLikeLaunchScript("python_script: train.py\n"));
  EXPECT_TRUE(LooksLikeLaunchScript("CKPT=$1\nDATA=$2\n"));
  EXPECT_TRUE(LooksLikeLaunchScript("python3.11 train.py --num-layers 2\n"));
}

TEST(LaunchScriptTest, QuotedCommandReadsBack) {
  EXPECT_EQ(script::QuoteWords({"a", "b c", "it's", ""}), "a 'b c' 'it'\\''s' ''");
}

}  // namespace
}  // namespace memtune::model
