// One run's series as gather reads them, before they join a side (the room's
// own header: gather.cpp and the document reader build sides with it).
#ifndef TRAINSCOPE_SRC_COMPARE_SIDE_DATA_HPP_
#define TRAINSCOPE_SRC_COMPARE_SIDE_DATA_HPP_

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "trainscope/compare/compare.hpp"

namespace trainscope::compare {

struct SeriesId {
  SeriesKind kind = SeriesKind::kRegion;
  std::string name;
  std::string device;
  bool operator<(const SeriesId& o) const {
    return std::tie(kind, name, device) < std::tie(o.kind, o.name, o.device);
  }
};

struct RunData {
  SideRun run;
  std::string step_key;  // "" when the run has none
  std::map<SeriesId, std::vector<double>> series;
};

// Appends the run and its series to `side` (a series the run lacks gets an
// empty entry for it; a new series gets empty entries for the earlier runs).
void add_run_data(RunData data, Side* side);

}  // namespace trainscope::compare

#endif  // TRAINSCOPE_SRC_COMPARE_SIDE_DATA_HPP_
