// Linear least squares the way numpy.linalg.lstsq solves it: the minimum-norm
// solution from a singular value decomposition, singular values below
// rcond * s_max treated as zero (rcond = eps * max(rows, cols) by default).
// One-sided Jacobi SVD: small systems (a handful of columns) and accurate to
// the last bits, which matters when the answer is compared with Extra-P's.
#ifndef TRAINSCOPE_SRC_SCALING_SVD_SOLVE_HPP_
#define TRAINSCOPE_SRC_SCALING_SVD_SOLVE_HPP_

#include <cstddef>
#include <vector>

namespace trainscope::scaling::detail {

struct LeastSquares {
  std::vector<double> x;  // cols entries
  std::size_t rank = 0;
};

// a: rows x cols, row-major. rcond == 0: numpy's default (rcond=None);
// rcond < 0: machine epsilon (numpy's rcond=-1).
LeastSquares solve_least_squares(const std::vector<double>& a, std::size_t rows, std::size_t cols,
                                 const std::vector<double>& b, double rcond = 0.0);

}  // namespace trainscope::scaling::detail

#endif  // TRAINSCOPE_SRC_SCALING_SVD_SOLVE_HPP_
