// The command line of one `trainscope` subcommand, parsed by CLI11: every
// subcommand gets the same help layout ("usage: ...", description, option
// groups, footer), `-h`/`--help`, and the same usage errors
// ("trainscope NAME: MESSAGE", then where to read more, exit code kExitUsage).
#ifndef TRAINSCOPE_TOOLS_CLI_HPP_
#define TRAINSCOPE_TOOLS_CLI_HPP_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "trainscope/common/closest_name.hpp"
#include "trainscope/diagnosis/diagnosis.hpp"

namespace trainscope::cli {

// What `--help` shows, and the name usage errors start with.
struct CommandText {
  std::string name;         // "run": messages start "trainscope run: "
  std::string usage;        // after "usage: "
  std::string description;  // between the usage line and the options
  std::string footer;       // after the options
};

// A subcommand's options. Options with a value take it as `--flag VALUE` or
// `--flag=VALUE`; their callbacks run as they are parsed, in command-line
// order (a repeated option calls its callback again). A callback rejects its
// value with bad_value(message).
class CommandLine {
 public:
  explicit CommandLine(CommandText text);

  // Options added from now on are listed under "GROUP:" in the help.
  void group(std::string name) { group_ = std::move(name); }

  CLI::Option* add_value(const std::string& flag, const std::string& value_name,
                         const std::string& help, std::function<void(const std::string&)> on_value);
  CLI::Option* add_value(const std::string& flag, const std::string& value_name,
                         const std::string& help, std::string* target);
  CLI::Option* add_value(const std::string& flag, const std::string& value_name,
                         const std::string& help, std::optional<std::string>* target);
  // `--flag`: sets *target.
  CLI::Option* add_flag(const std::string& flag, const std::string& help, bool* target);
  // `--flag` ("" in *target) or `--flag=VALUE`, never `--flag VALUE`: the next
  // word may be a positional.
  CLI::Option* add_flag_with_value(const std::string& flag, const std::string& value_name,
                                   const std::string& help, std::optional<std::string>* target);
  // The words that are not options, and every word after `--`. With
  // options_end_at_first, the first such word ends the options too: it and
  // all after it are positionals (`trainscope run python train.py --lr 1`).
  CLI::Option* add_positionals(const std::string& name, std::vector<std::string>* target,
                               bool options_end_at_first);

  // Parses the arguments after the subcommand's name. nullopt: parsed, go on;
  // else the exit code, after printing the help (kExitOk) or a usage error.
  std::optional<int> parse(const std::vector<std::string>& args);

  // Prints "trainscope NAME: MESSAGE" and one line saying where to read more
  // (`trainscope NAME --help`) to stderr, not the whole help; kExitUsage.
  int usage_error(const std::string& message) const;
  std::string help() const { return app_.help(); }

 private:
  CommandText text_;
  CLI::App app_;
  std::string group_ = "options";
};

// " (did you mean 'X'?)" when a candidate is close to `word`
// (trainscope::closest_name), else "".
inline std::string did_you_mean(const std::string& word,
                                const std::vector<std::string>& candidates) {
  const std::string best = closest_name(word, candidates);
  return best.empty() ? std::string() : " (did you mean '" + best + "'?)";
}

// Throws the usage error MESSAGE, from an option's callback.
[[noreturn]] void bad_value(std::string message);

// The one set of number parsers for option values, for every subcommand. Each
// returns the number or throws the usage error (bad_value)
//   "FLAG needs WHAT, got 'VALUE'"
// The whole word must be the number: no sign-less garbage after it, no
// spaces, no hex; doubles must be finite.
//
// A whole number in [min, max].
long long whole_number(const std::string& flag, const std::string& value, long long min,
                       long long max = 1000000000);
// int-sized whole_number.
int count(const std::string& flag, const std::string& value, int min, int max = 1000000);
// A finite number; min/max bound it, inclusive unless *_open (then strictly
// above min / below max).
struct Bounds {
  double min = -1e308;
  double max = 1e308;
  bool min_open = false;
  bool max_open = false;
};
double number(const std::string& flag, const std::string& value, Bounds bounds = {});
// A positive number of seconds (> 0).
double seconds(const std::string& flag, const std::string& value);
// Comma-separated whole numbers >= 0, e.g. GPU indices "0,1,3"; none empty.
std::vector<int> index_list(const std::string& flag, const std::string& value);

// The options of every command that diagnoses a run (diagnose, top):
// --window K, --phase PHASE=KEY (repeatable), --threshold NAME=VALUE
// (repeatable), into `options`.
void add_diagnosis_options(CommandLine* line, diagnosis::FollowOptions* options);
// The ledger's (docs/ledger.md; diagnose, run): --peak-flops, --price-per-kwh,
// --price-per-hour, --grams-co2-per-kwh into `ledger`.
void add_ledger_options(CommandLine* line, steps::LedgerOptions* ledger);
// --threshold NAME=VALUE (repeatable) into `thresholds`, with `help` (which names apply).
void add_threshold_option(CommandLine* line, diagnosis::Thresholds* thresholds,
                          const std::string& help);

}  // namespace trainscope::cli

#endif  // TRAINSCOPE_TOOLS_CLI_HPP_
