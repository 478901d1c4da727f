#include "trainscope/scaling/model.hpp"

#include <cmath>
#include <cstdlib>
#include <numeric>
#include <set>
#include <string>

#include "fmt/format.h"
#include "scaling/python_repr.hpp"
#include "trainscope/stats/numbers.hpp"

namespace trainscope::scaling {

Exponent Exponent::Fraction(int numerator, int denominator) {
  if (denominator < 0) {
    numerator = -numerator;
    denominator = -denominator;
  }
  const int divisor = std::gcd(std::abs(numerator), denominator);
  if (divisor > 1) {
    numerator /= divisor;
    denominator /= divisor;
  }
  Exponent e;
  e.value = static_cast<double>(numerator) / static_cast<double>(denominator);
  e.text = denominator == 1 ? fmt::format("{}", numerator)
                            : fmt::format("{}/{}", numerator, denominator);
  return e;
}

Exponent Exponent::Number(double value) {
  Exponent e;
  e.value = value;
  e.text = detail::python_repr(value);
  return e;
}

double Factor::evaluate(double x) const noexcept {
  double result = 1.0;
  if (!poly.is_zero()) result *= std::pow(x, poly.value);
  if (!log.is_zero()) result *= std::pow(std::log2(x), log.value);
  return result;
}

double Term::evaluate(absl::Span<const double> coordinate) const noexcept {
  double result = coefficient;
  for (const Factor& factor : factors) {
    const auto index = static_cast<std::size_t>(factor.parameter);
    result *= index < coordinate.size() ? factor.evaluate(coordinate[index]) : stats::kNaN;
  }
  return result;
}

double Model::evaluate(absl::Span<const double> coordinate) const noexcept {
  double result = constant;
  for (const Term& term : terms) result += term.evaluate(coordinate);
  return result;
}

namespace {

enum class Style { kText, kPython, kCpp };

// Keywords of Python and C++ and the names the expressions themselves use.
bool reserved(std::string_view name) {
  static const std::set<std::string_view> kReserved = {
      "False",    "None",      "True",      "and",      "as",       "assert",   "async",
      "await",    "break",     "class",     "continue", "def",      "del",      "elif",
      "else",     "except",    "finally",   "for",      "from",     "global",   "if",
      "import",   "in",        "is",        "lambda",   "nonlocal", "not",      "or",
      "pass",     "raise",     "return",    "try",      "while",    "with",     "yield",
      "alignas",  "alignof",   "auto",      "bool",     "case",     "catch",    "char",
      "const",    "constexpr", "default",   "delete",   "do",       "double",   "enum",
      "explicit", "extern",    "float",     "friend",   "goto",     "inline",   "int",
      "long",     "mutable",   "namespace", "new",      "noexcept", "nullptr",  "operator",
      "private",  "protected", "public",    "register", "short",    "signed",   "sizeof",
      "static",   "struct",    "switch",    "template", "this",     "throw",    "true",
      "false",    "typedef",   "typeid",    "typename", "union",    "unsigned", "using",
      "virtual",  "void",      "volatile",  "xor",      "bitand",   "bitor",    "compl",
      "not_eq",   "or_eq",     "and_eq",    "xor_eq",   "log2",     "std",      "pow",
      "math"};
  return kReserved.count(name) > 0;
}

std::string identifier_for(std::string_view name) {
  std::string out;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += ok ? c : '_';
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out.insert(out.begin(), '_');
  // Leading "__" and "_[A-Z]" are reserved to C++ implementations.
  if (out.size() > 1 && out[0] == '_' && (out[1] == '_' || (out[1] >= 'A' && out[1] <= 'Z'))) {
    out.insert(out.begin(), 'p');
  }
  if (reserved(out)) out += '_';
  return out;
}

std::string parameter_name(const Model& model, int index, Style style,
                           const std::vector<std::string>& identifiers) {
  const auto i = static_cast<std::size_t>(index);
  if (style != Style::kText && i < identifiers.size()) return identifiers[i];
  return i < model.parameters.size() ? model.parameters[i] : fmt::format("x{}", index);
}

std::string factor_string(const Factor& factor, const std::string& name, Style style) {
  std::string out;
  auto append = [&](std::string part) {
    if (!out.empty()) out += style == Style::kText ? " * " : "*";
    out += part;
  };
  switch (style) {
    case Style::kText:
      if (!factor.poly.is_zero()) append(fmt::format("{}^({})", name, factor.poly.text));
      if (!factor.log.is_zero()) append(fmt::format("log2({})^({})", name, factor.log.text));
      break;
    case Style::kPython:
      if (!factor.poly.is_zero()) append(fmt::format("{}**({})", name, factor.poly.text));
      if (!factor.log.is_zero()) append(fmt::format("log2({})**({})", name, factor.log.text));
      break;
    case Style::kCpp:
      if (!factor.poly.is_zero())
        append(fmt::format("std::pow({}, {})", name, detail::python_repr(factor.poly.value)));
      if (!factor.log.is_zero()) {
        append(fmt::format("std::pow(std::log2({}), {})", name,
                           detail::python_repr(factor.log.value)));
      }
      break;
  }
  return out;
}

// Extra-P's Function.to_string: the constant unless it is 0 (or the model is
// constant), then each term as "coefficient * factors" (coefficient left out
// when it is exactly 1), joined by " + "; the Python form joins with '*' and
// '+' and folds "+-" into "-".
std::string render(const Model& model, Style style) {
  const std::vector<std::string> identifiers = model.identifiers();
  const std::string mul = style == Style::kText ? " * " : "*";
  const std::string add = style == Style::kText ? " + " : "+";
  std::string out;
  auto append_term = [&](const std::string& text) {
    if (!out.empty()) out += add;
    out += text;
  };
  if (model.constant != 0 || model.terms.empty()) append_term(detail::python_repr(model.constant));
  for (const Term& term : model.terms) {
    std::string text;
    if (term.coefficient != 1 || term.factors.empty()) text = detail::python_repr(term.coefficient);
    for (const Factor& factor : term.factors) {
      if (!text.empty()) text += mul;
      text +=
          factor_string(factor, parameter_name(model, factor.parameter, style, identifiers), style);
    }
    append_term(text);
  }
  if (style != Style::kText) {
    for (std::size_t at = out.find("+-"); at != std::string::npos; at = out.find("+-", at))
      out.replace(at, 2, "-");
  }
  return out;
}

}  // namespace

std::vector<std::string> Model::identifiers() const {
  std::vector<std::string> out;
  std::set<std::string> taken;
  for (const std::string& name : parameters) {
    std::string id = identifier_for(name);
    for (int n = 2; taken.count(id) > 0; ++n) id = fmt::format("{}_{}", identifier_for(name), n);
    taken.insert(id);
    out.push_back(std::move(id));
  }
  return out;
}

std::string Model::formula() const { return render(*this, Style::kText); }
std::string Model::python() const { return render(*this, Style::kPython); }
std::string Model::cpp() const { return render(*this, Style::kCpp); }

}  // namespace trainscope::scaling
