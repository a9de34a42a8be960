// Entry points of the subcommands, one per cmd_<name>.cc. argv[0] is the subcommand name.
#pragma once

namespace memtune::cli {

int RunUnits(int argc, char** argv);
int RunJob(int argc, char** argv);
int RunInspect(int argc, char** argv);
int RunReplay(int argc, char** argv);
int RunCalibrate(int argc, char** argv);

int RunEstimate(int argc, char** argv);
int RunCheck(int argc, char** argv);
int RunValidate(int argc, char** argv);
int RunPlan(int argc, char** argv);
int RunSimulate(int argc, char** argv);
int RunModels(int argc, char** argv);
int RunGpus(int argc, char** argv);
int RunDiagnose(int argc, char** argv);
int RunLint(int argc, char** argv);
int RunReport(int argc, char** argv);

}  // namespace memtune::cli
