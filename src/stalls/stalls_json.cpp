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
