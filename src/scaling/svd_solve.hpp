// Linear least squares the way numpy.linalg.lstsq solves it: the minimum-norm
// solution from a singular value decomposition, singular values below
// rcond * s_max treated as zero (rcond = eps * max(rows, cols) by default).
// One-sided Jacobi SVD: small systems (a handful of columns), accurate to the
// last bits even with badly scaled columns, which matters when the answer is
// compared with Extra-P's. Factor once, solve for many right-hand sides (the
// bootstrap refits the same design hundreds of times).
#ifndef TRAINSCOPE_SRC_SCALING_SVD_SOLVE_HPP_
#define TRAINSCOPE_SRC_SCALING_SVD_SOLVE_HPP_

#include <cstddef>
#include <vector>

#include "absl/types/span.h"

namespace trainscope::scaling::detail {

class SvdLeastSquares {
 public:
  // a: rows x cols, row-major. rcond == 0: numpy's default (rcond=None);
  // rcond < 0: machine epsilon (numpy's rcond=-1).
  SvdLeastSquares(const std::vector<double>& a, std::size_t rows, std::size_t cols,
                  double rcond = 0.0);

  std::size_t rank() const noexcept { return rank_; }
  std::vector<double> solve(absl::Span<const double> b) const;  // b: rows entries

 private:
  std::size_t rows_, cols_;
  std::vector<double> u_;       // A V: rows x cols, column-major, column c of norm sigma_c
  std::vector<double> v_;       // cols x cols, column-major
  std::vector<double> weight_;  // 1 / sigma_c^2 for kept singular values, 0 for dropped ones
  std::size_t rank_ = 0;
};

struct LeastSquares {
  std::vector<double> x;  // cols entries
  std::size_t rank = 0;
};

// One right-hand side.
inline LeastSquares solve_least_squares(const std::vector<double>& a, std::size_t rows,
                                        std::size_t cols, const std::vector<double>& b,
                                        double rcond = 0.0) {
  const SvdLeastSquares svd(a, rows, cols, rcond);
  return {svd.solve(b), svd.rank()};
}

}  // namespace trainscope::scaling::detail

#endif  // TRAINSCOPE_SRC_SCALING_SVD_SOLVE_HPP_
