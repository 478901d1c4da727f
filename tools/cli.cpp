#include "cli.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "commands.hpp"
#include "fmt/format.h"

namespace trainscope::cli {
namespace {

constexpr std::size_t kHelpColumn = 23;  // where an option's help starts

// "usage: ...", the description, each option group (help flag aside), the
// footer. An option is "  --flag VALUE" or "  --flag[=VALUE]", its help from
// kHelpColumn; a help with newlines continues there.
class HelpFormatter : public CLI::Formatter {
 public:
  explicit HelpFormatter(std::string usage) : usage_(std::move(usage)) {
    column_width(kHelpColumn);
  }

  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode) const override {
    std::string out = "usage: " + usage_ + "\n";
    if (!app->get_description().empty()) out += "\n" + app->get_description();
    for (const std::string& group : app->get_groups()) {
      const std::vector<const CLI::Option*> options =
          app->get_options([&](const CLI::Option* option) {
            return option->get_group() == group && option->nonpositional() &&
                   option != app->get_help_ptr();
          });
      if (!group.empty() && !options.empty()) out += make_group(group, false, options);
    }
    if (!app->get_footer().empty()) out += "\n" + app->get_footer();
    return out;
  }

  std::string make_option(const CLI::Option* option, bool /*is_positional*/) const override {
    std::string name = option->get_name();
    if (!option->get_option_text().empty()) {
      name += option->get_option_text();
    } else if (option->get_type_size() != 0) {
      name += " " + option->get_type_name();
    }
    std::ostringstream out;
    CLI::detail::format_help(out, name, option->get_description(), get_column_width());
    return out.str();
  }

 private:
  std::string usage_;
};

bool option_like(const std::string& word) { return word.size() > 1 && word[0] == '-'; }

// CLI11 2.1 reads `--flag=` as `--flag` and takes the next word for its
// value; `--flag ""` keeps the value empty, as the user wrote it. A flag with
// a value that ends the arguments without one goes to *missing instead.
std::vector<std::string> empty_values_apart(const CLI::App& app,
                                            const std::vector<std::string>& args,
                                            std::string* missing) {
  std::vector<std::string> out;
  bool options = true;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (options && arg == "--") {
      options = false;
    } else if (options && !option_like(arg)) {
      options = !app.get_positionals_at_end();  // the first positional may end them
    }
    if (!options || !option_like(arg)) {
      out.push_back(arg);
      continue;
    }
    const std::size_t equals = arg.find('=');
    const CLI::Option* option = app.get_option_no_throw(arg.substr(0, equals));
    const bool valued = option != nullptr && option->get_expected_min() > 0;
    if (valued && equals == std::string::npos) {
      if (i + 1 == args.size()) {
        *missing = arg;
        return {};
      }
      out.push_back(arg);
      out.push_back(args[++i]);
    } else if (valued && equals + 1 == arg.size()) {
      out.push_back(arg.substr(0, equals));
      out.push_back("");
    } else {
      out.push_back(arg);
    }
  }
  return out;
}

}  // namespace

CommandLine::CommandLine(CommandText text)
    : text_(std::move(text)), app_(text_.description, "trainscope " + text_.name) {
  app_.footer(text_.footer);
  app_.formatter(std::make_shared<HelpFormatter>(text_.usage));
  app_.set_help_flag("-h,--help", "print this help");
}

CLI::Option* CommandLine::add_value(const std::string& flag, const std::string& value_name,
                                    const std::string& help,
                                    std::function<void(const std::string&)> on_value) {
  return app_.add_option_function<std::string>(flag, std::move(on_value), help)
      ->type_name(value_name)
      ->trigger_on_parse()
      ->group(group_);
}

CLI::Option* CommandLine::add_value(const std::string& flag, const std::string& value_name,
                                    const std::string& help, std::string* target) {
  return add_value(flag, value_name, help, [target](const std::string& v) { *target = v; });
}

CLI::Option* CommandLine::add_value(const std::string& flag, const std::string& value_name,
                                    const std::string& help, std::optional<std::string>* target) {
  return add_value(flag, value_name, help, [target](const std::string& v) { *target = v; });
}

CLI::Option* CommandLine::add_flag(const std::string& flag, const std::string& help, bool* target) {
  return app_.add_flag(flag, *target, help)->group(group_);
}

CLI::Option* CommandLine::add_flag_with_value(const std::string& flag,
                                              const std::string& value_name,
                                              const std::string& help,
                                              std::optional<std::string>* target) {
  // "{}": the flag's value when given without one.
  return app_.add_flag(flag + "{}", *target, help)
      ->option_text("[=" + value_name + "]")
      ->group(group_);
}

CLI::Option* CommandLine::add_positionals(const std::string& name, std::vector<std::string>* target,
                                          bool options_end_at_first) {
  app_.positionals_at_end(options_end_at_first);
  return app_.add_option(name, *target);
}

std::optional<int> CommandLine::parse(const std::vector<std::string>& args) {
  std::string missing;
  std::vector<std::string> words = empty_values_apart(app_, args, &missing);
  if (!missing.empty()) return usage_error(missing + " needs a value");
  std::reverse(words.begin(), words.end());  // CLI11 takes the last word first
  try {
    app_.parse(words);
  } catch (const CLI::CallForHelp&) {
    std::fputs(help().c_str(), stdout);
    return kExitOk;
  } catch (const CLI::ExtrasError&) {
    const std::vector<std::string> extras = app_.remaining();
    const auto unknown = std::find_if(extras.begin(), extras.end(),
                                      [](const std::string& word) { return word != "--"; });
    const std::string word = unknown == extras.end() ? "" : *unknown;
    std::vector<std::string> names;
    for (const CLI::Option* option : app_.get_options()) {
      for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    }
    const std::string flag = word.substr(0, word.find('='));
    return usage_error("unknown option " + word + did_you_mean(flag, names));
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }
  return std::nullopt;
}

int CommandLine::usage_error(const std::string& message) const {
  std::fprintf(stderr, "trainscope %s: %s\n(see `trainscope %s --help`)\n", text_.name.c_str(),
               message.c_str(), text_.name.c_str());
  return kExitUsage;
}

void bad_value(std::string message) { throw CLI::ValidationError(std::move(message)); }

namespace {

[[noreturn]] void needs(const std::string& flag, const std::string& what, const std::string& value,
                        const std::string& note = "") {
  bad_value(fmt::format("{} needs {}, got '{}'{}", flag, what, value, note));
}

// The whole word as a finite decimal number: digits, one sign, a point and
// an exponent. absl::SimpleAtod alone would accept surrounding spaces,
// "inf"/"nan" and hexadecimal ("0x10" as 16): all refused.
bool finite_number(const std::string& value, double* x) {
  return !value.empty() && value.find_first_not_of("0123456789+-.eE") == std::string::npos &&
         absl::SimpleAtod(value, x) && std::isfinite(*x);
}

// A number written in another base ("0x10", which strtod reads as 16): the
// message says why it is refused.
std::string base_note(const std::string& value) {
  const std::size_t at = value.find_first_not_of("+-");
  const bool hex = at != std::string::npos && at + 1 < value.size() && value[at] == '0' &&
                   (value[at + 1] == 'x' || value[at + 1] == 'X');
  return hex ? " (decimal numbers only)" : "";
}

// Shortest text of a bound: 1, 0.5, 1e+06.
std::string bound_text(double x) { return fmt::format("{}", x); }

}  // namespace

long long whole_number(const std::string& flag, const std::string& value, long long min,
                       long long max) {
  long long n = 0;
  const char* first = value.data();
  const char* last = first + value.size();
  const auto [end, error] = std::from_chars(first, last, n);
  const std::string what = max >= 1000000 ? fmt::format("a whole number >= {}", min)
                                          : fmt::format("a whole number from {} to {}", min, max);
  if (value.empty() || error != std::errc() || end != last || n < min || n > max) {
    needs(flag, what, value, base_note(value));
  }
  return n;
}

int count(const std::string& flag, const std::string& value, int min, int max) {
  return static_cast<int>(whole_number(flag, value, min, max));
}

double number(const std::string& flag, const std::string& value, Bounds bounds) {
  std::string what = "a number";
  const bool has_min = bounds.min > -1e308;
  const bool has_max = bounds.max < 1e308;
  if (has_min && has_max) {
    what += fmt::format(" {} {} and {} {}", bounds.min_open ? ">" : ">=", bound_text(bounds.min),
                        bounds.max_open ? "<" : "<=", bound_text(bounds.max));
  } else if (has_min) {
    what += fmt::format(" {} {}", bounds.min_open ? ">" : ">=", bound_text(bounds.min));
  } else if (has_max) {
    what += fmt::format(" {} {}", bounds.max_open ? "<" : "<=", bound_text(bounds.max));
  }
  double x = 0;
  if (!finite_number(value, &x) || (bounds.min_open ? x <= bounds.min : x < bounds.min) ||
      (bounds.max_open ? x >= bounds.max : x > bounds.max)) {
    needs(flag, what, value, base_note(value));
  }
  return x;
}

double seconds(const std::string& flag, const std::string& value) {
  double x = 0;
  if (!finite_number(value, &x) || !(x > 0)) {
    needs(flag, "a positive number of seconds", value, base_note(value));
  }
  return x;
}

std::vector<int> index_list(const std::string& flag, const std::string& value) {
  std::vector<int> out;
  std::size_t start = 0;
  while (start <= value.size()) {
    const std::size_t comma = std::min(value.find(',', start), value.size());
    const std::string item = value.substr(start, comma - start);
    int n = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), n);
    if (item.empty() || error != std::errc() || end != item.data() + item.size() || n < 0) {
      needs(flag, "indices >= 0 like 0,1", value);
    }
    out.push_back(n);
    start = comma + 1;
  }
  return out;
}

}  // namespace trainscope::cli
