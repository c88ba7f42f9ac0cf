// Runs the built `holdback` binary (HOLDBACK_CLI) for the CLI tests. Files are named after the
// running test, so tests can run in parallel.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace holdback::testing {

struct CliRun {
  int exitCode = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

inline std::string testFilePrefix() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return ::testing::TempDir() + "holdback_" + info->test_suite_name() + "_" + info->name() + "_";
}

inline std::string slurp(const std::string& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs `holdback ARGS` through the shell and captures its exit code, stdout and stderr.
inline CliRun holdback(const std::string& args) {
  const std::string base = testFilePrefix() + "run";
  const std::string command =
      std::string(HOLDBACK_CLI) + " " + args + " >" + base + ".out 2>" + base + ".err";
  const int status = std::system(command.c_str());
  CliRun run;
  run.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = slurp(base + ".out");
  run.err = slurp(base + ".err");
  return run;
}

// Writes `text` to a temporary file and returns its path.
inline std::string writeTemp(const std::string& name, const std::string& text) {
  std::string file = testFilePrefix() + name;
  std::ofstream(file) << text;
  return file;
}

inline const std::string kExamples = std::string(HOLDBACK_SOURCE_DIR) + "/examples/configs/";

}  // namespace holdback::testing
