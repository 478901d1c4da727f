#include "stalls/stalls_json.hpp"

#include <cmath>
#include <limits>
#include <utility>

#include "fmt/format.h"

namespace trainscope::stalls::detail {
namespace {

using nlohmann::json;

json pass_json(const PassStalls& p) {
  return {{"pass", p.index},
          {"wall_s", p.wall_s},
          {"wait_s", p.wait_s},
          {"data_wait_share", p.share},
          {"input_bound", input_bound_class(p.share)},
          {"batches", p.batches},
          {"wait_p50_s", p.wait_p50_s},
          {"wait_p95_s", p.wait_p95_s},
          {"wait_max_s", p.wait_max_s},
          {"startup_wait_share", p.startup_wait_share},
          {"bunched", p.bunched}};
}

// A pass's figures; "pass" only where pass_json wrote it (not in "ranks").
PassStalls pass_from_json(const Field& f, bool with_index) {
  PassStalls p;
  if (with_index) p.index = f["pass"].int_at_least(0);
  p.wall_s = f["wall_s"].number();
  p.wait_s = f["wait_s"].number();
  p.share = f["data_wait_share"].number();
  (void)f["input_bound"].string();  // derived from the share
  p.batches = static_cast<std::size_t>(f["batches"].unsigned_integer());
  p.wait_p50_s = f["wait_p50_s"].number();
  p.wait_p95_s = f["wait_p95_s"].number();
  p.wait_max_s = f["wait_max_s"].number();
  p.startup_wait_share = f["startup_wait_share"].number();
  p.bunched = f["bunched"].boolean();
  return p;
}

std::uint32_t rank_from_json(const Field& f) {
  const std::int64_t rank = f.integer(0);
  if (rank > std::numeric_limits<std::uint32_t>::max()) f.fail("too large for a rank");
  return static_cast<std::uint32_t>(rank);
}

}  // namespace

std::string type_name(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::discarded:
      return "nothing";
    default:
      return "a number";
  }
}

void Field::fail(const std::string& what) const {
  throw DocumentError{path_.empty() ? what : path_ + ": " + what};
}

Field Field::operator[](const std::string& key) const {
  std::optional<Field> member = find(key);
  if (!member) Field(*value_, path_.empty() ? key : path_ + "." + key).fail("missing");
  return *member;
}

std::optional<Field> Field::find(const std::string& key) const {
  if (!value_->is_object()) fail(type_name(*value_) + ", not an object");
  const auto it = value_->find(key);
  if (it == value_->end()) return std::nullopt;
  return Field(*it, path_.empty() ? key : path_ + "." + key);
}

std::vector<std::pair<std::string, Field>> Field::members() const {
  if (!value_->is_object()) fail(type_name(*value_) + ", not an object");
  std::vector<std::pair<std::string, Field>> out;
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    out.emplace_back(it.key(),
                     Field(it.value(), path_.empty() ? it.key() : path_ + "." + it.key()));
  }
  return out;
}

std::vector<Field> Field::items() const {
  if (!value_->is_array()) fail(type_name(*value_) + ", not an array");
  std::vector<Field> out;
  for (std::size_t i = 0; i < value_->size(); ++i) {
    out.emplace_back((*value_)[i], fmt::format("{}[{}]", path_, i));
  }
  return out;
}

double Field::number() const {
  if (value_->is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!value_->is_number()) fail(type_name(*value_) + ", not a number");
  return value_->get<double>();
}

std::int64_t Field::integer(std::int64_t minimum) const {
  std::int64_t n = 0;
  if (value_->is_number_unsigned()) {
    const std::uint64_t u = value_->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(fmt::format("{} is too large", u));
    }
    n = static_cast<std::int64_t>(u);
  } else if (value_->is_number_integer()) {
    n = value_->get<std::int64_t>();
  } else {
    fail(type_name(*value_) + ", not a whole number");
  }
  if (n < minimum) fail(fmt::format("{}, not a whole number >= {}", n, minimum));
  return n;
}

std::uint64_t Field::unsigned_integer() const {
  if (value_->is_number_unsigned()) return value_->get<std::uint64_t>();
  return static_cast<std::uint64_t>(integer(0));
}

int Field::int_at_least(int minimum) const {
  const std::int64_t n = integer(minimum);
  if (n > std::numeric_limits<int>::max()) fail(fmt::format("{} is too large", n));
  return static_cast<int>(n);
}

std::string Field::string() const {
  if (!value_->is_string()) fail(type_name(*value_) + ", not a string");
  return value_->get<std::string>();
}

bool Field::boolean() const {
  if (!value_->is_boolean()) fail(type_name(*value_) + ", not true or false");
  return value_->get<bool>();
}

std::vector<std::string> Field::strings() const {
  std::vector<std::string> out;
  for (const Field& item : items()) out.push_back(item.string());
  return out;
}

json run_stalls_to_json(const RunStalls& r) {
  json passes = json::array();
  for (const PassStalls& p : r.passes) passes.push_back(pass_json(p));
  json out = {{"run_dir", r.run_dir},
              {"status", r.status},
              {"passes", std::move(passes)},
              {"run", pass_json(r.total)},
              {"pattern", r.pattern}};
  if (r.batch_size) out["batch_size"] = *r.batch_size;
  out["rank"] = r.rank;
  json ranks = json::array();
  for (const RankStalls& k : r.ranks) {
    json one = pass_json(k.total);
    one.erase("pass");
    one["rank"] = k.rank;
    ranks.push_back(std::move(one));
  }
  out["ranks"] = std::move(ranks);
  return out;
}

RunStalls run_stalls_from_json(const Field& f) {
  RunStalls r;
  r.run_dir = f["run_dir"].string();
  r.status = f["status"].string();
  for (const Field& p : f["passes"].items()) r.passes.push_back(pass_from_json(p, true));
  r.total = pass_from_json(f["run"], true);
  r.pattern = f["pattern"].string();
  if (std::optional<Field> size = f.find("batch_size")) r.batch_size = size->int_at_least(1);
  r.rank = rank_from_json(f["rank"]);
  for (const Field& k : f["ranks"].items()) {
    r.ranks.push_back({rank_from_json(k["rank"]), pass_from_json(k, false)});
  }
  return r;
}

}  // namespace trainscope::stalls::detail
