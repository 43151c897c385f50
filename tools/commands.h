// The subcommands of the `kfuse` CLI. Each returns the process exit code
// and throws CliError for problems that stop it before a verdict.
#pragma once

#include "fusion_file.h"

namespace kfcli {

int run_command(const Options& options);
int explain_command(const Options& options);
// `kfuse compile FILE... --arch sm_XY -o OUT`: writes a kernel bundle.
int compile_command(const Options& options);
// `kfuse bench ARGS...`: parses its own options (argv after "bench").
int bench_command(int argc, char** argv);

}  // namespace kfcli
