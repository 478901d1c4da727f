#include "trainscope/scaling/model.hpp"

#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string>

#include "fmt/format.h"
#include "scaling/python_repr.hpp"

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
  e.text = denominator == 1 ? fmt::format("{}", numerator) : fmt::format("{}/{}", numerator, denominator);
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
    result *= index < coordinate.size() ? factor.evaluate(coordinate[index]) : std::nan("");
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

std::string parameter_name(const Model& model, int index) {
  const auto i = static_cast<std::size_t>(index);
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
      if (!factor.poly.is_zero()) append(fmt::format("std::pow({}, {})", name, detail::python_repr(factor.poly.value)));
      if (!factor.log.is_zero()) {
        append(fmt::format("std::pow(std::log2({}), {})", name, detail::python_repr(factor.log.value)));
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
      text += factor_string(factor, parameter_name(model, factor.parameter), style);
    }
    append_term(text);
  }
  if (style != Style::kText) {
    for (std::size_t at = out.find("+-"); at != std::string::npos; at = out.find("+-", at)) out.replace(at, 2, "-");
  }
  return out;
}

}  // namespace

std::string Model::formula() const { return render(*this, Style::kText); }
std::string Model::python() const { return render(*this, Style::kPython); }
std::string Model::cpp() const { return render(*this, Style::kCpp); }

}  // namespace trainscope::scaling
