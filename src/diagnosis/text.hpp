// The diagnosis's figures in its sentences and documents (internal): one
// rule for a share and a duration, stats/format_numbers.hpp, "n/a" for no
// figure.
#ifndef TRAINSCOPE_SRC_DIAGNOSIS_TEXT_HPP_
#define TRAINSCOPE_SRC_DIAGNOSIS_TEXT_HPP_

#include <string>

#include "trainscope/stats/format_numbers.hpp"

namespace trainscope::diagnosis::text {

inline std::string secs(double s) { return stats::format_seconds(s, 3, stats::kNotAvailable); }
inline std::string pct(double share) { return stats::format_share(share, 1, stats::kNotAvailable); }

}  // namespace trainscope::diagnosis::text

#endif  // TRAINSCOPE_SRC_DIAGNOSIS_TEXT_HPP_
