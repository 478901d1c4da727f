// Internal: dense linear least squares, min ||A x - b||_2, for the small
// problems of performance modeling (a few to a few hundred rows, k <= ~10
// columns). Householder QR with column pivoting, after scaling every column to
// unit norm: PMNF columns span many orders of magnitude (p^3 next to p^-1),
// and the normal equations would square that condition number.
//
// The factorization is kept, so one design matrix can be solved against many
// right-hand sides (the bootstrap refits the same structure hundreds of times).
// Rank-deficient problems (collinear columns, fewer rows than columns) get the
// basic solution: the coefficients of the columns past the numerical rank are
// zero (not numpy's minimum-norm solution; svd_solve.hpp is the SVD solver for
// results that must match Extra-P/numpy). Inputs must be
// finite; non-finite entries give non-finite results.
#ifndef TRAINSCOPE_SRC_SCALING_LEAST_SQUARES_HPP_
#define TRAINSCOPE_SRC_SCALING_LEAST_SQUARES_HPP_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace trainscope::scaling::detail {

class PivotedQr {
 public:
  // `a` is rows x cols, row-major (a[i * cols + j] is row i, column j).
  PivotedQr(absl::Span<const double> a, std::size_t rows, std::size_t cols)
      : rows_(rows), cols_(cols), qr_(rows * cols), scale_(cols, 1.0), perm_(cols) {
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t j = 0; j < cols; ++j) at(i, j) = a[i * cols + j];
    }
    for (std::size_t j = 0; j < cols; ++j) {
      perm_[j] = j;
      const double norm = column_norm(j, 0);
      if (norm > 0 && std::isfinite(norm)) {
        scale_[j] = 1.0 / norm;
        for (std::size_t i = 0; i < rows; ++i) at(i, j) *= scale_[j];
      }
    }
    factorize();
  }

  std::size_t rows() const noexcept { return rows_; }
  std::size_t cols() const noexcept { return cols_; }
  // The numerical rank: pivots below max(rows, cols) * eps * |R_00| count as zero.
  std::size_t rank() const noexcept { return rank_; }

  // The coefficients (cols of them) minimizing ||A x - b||_2; b has rows entries.
  std::vector<double> solve(absl::Span<const double> b) const {
    std::vector<double> y(b.begin(), b.end());
    // y <- Q^T b
    for (std::size_t s = 0; s < reflectors_.size(); ++s) {
      const std::vector<double>& v = reflectors_[s];
      double dot = 0;
      for (std::size_t i = s; i < rows_; ++i) dot += v[i - s] * y[i];
      const double f = tau_[s] * dot;
      for (std::size_t i = s; i < rows_; ++i) y[i] -= f * v[i - s];
    }
    // R z = y on the leading rank x rank block; the rest of z is zero.
    std::vector<double> z(cols_, 0.0);
    for (std::size_t s = rank_; s-- > 0;) {
      double sum = y[s];
      for (std::size_t j = s + 1; j < rank_; ++j) sum -= at(s, j) * z[j];
      z[s] = sum / at(s, s);
    }
    std::vector<double> x(cols_, 0.0);
    for (std::size_t s = 0; s < cols_; ++s) x[perm_[s]] = z[s] * scale_[perm_[s]];
    return x;
  }

 private:
  double& at(std::size_t i, std::size_t j) { return qr_[j * rows_ + i]; }  // column-major
  double at(std::size_t i, std::size_t j) const { return qr_[j * rows_ + i]; }

  // Euclidean norm of column j from row `from` down, without overflow.
  double column_norm(std::size_t j, std::size_t from) const {
    double largest = 0;
    for (std::size_t i = from; i < rows_; ++i) largest = std::max(largest, std::abs(at(i, j)));
    if (largest == 0 || !std::isfinite(largest)) return largest;
    double sum = 0;
    for (std::size_t i = from; i < rows_; ++i) {
      const double t = at(i, j) / largest;
      sum += t * t;
    }
    return largest * std::sqrt(sum);
  }

  void factorize() {
    const std::size_t steps = std::min(rows_, cols_);
    double tolerance = 0;
    rank_ = 0;
    for (std::size_t s = 0; s < steps; ++s) {
      // Pivot: the remaining column with the largest norm below row s (k is
      // small, so the norms are recomputed instead of downdated).
      std::size_t best = s;
      double best_norm = -1;
      for (std::size_t j = s; j < cols_; ++j) {
        const double norm = column_norm(j, s);
        if (norm > best_norm) {
          best_norm = norm;
          best = j;
        }
      }
      if (best != s) {
        for (std::size_t i = 0; i < rows_; ++i) std::swap(at(i, s), at(i, best));
        std::swap(perm_[s], perm_[best]);
      }
      if (s == 0) {
        tolerance = static_cast<double>(std::max(rows_, cols_)) * std::numeric_limits<double>::epsilon() * best_norm;
      }
      if (!(best_norm > tolerance)) break;  // the rest is numerically zero (or not finite)

      // Householder reflector H = I - tau v v^T with H x = alpha e1.
      const double x0 = at(s, s);
      const double alpha = x0 >= 0 ? -best_norm : best_norm;
      std::vector<double> v(rows_ - s);
      for (std::size_t i = s; i < rows_; ++i) v[i - s] = at(i, s);
      v[0] = x0 - alpha;  // no cancellation: alpha has the opposite sign of x0
      double vv = 0;
      for (const double e : v) vv += e * e;
      const double tau = vv > 0 ? 2.0 / vv : 0.0;
      for (std::size_t j = s + 1; j < cols_; ++j) {
        double dot = 0;
        for (std::size_t i = s; i < rows_; ++i) dot += v[i - s] * at(i, j);
        const double f = tau * dot;
        for (std::size_t i = s; i < rows_; ++i) at(i, j) -= f * v[i - s];
      }
      at(s, s) = alpha;
      for (std::size_t i = s + 1; i < rows_; ++i) at(i, s) = 0;
      reflectors_.push_back(std::move(v));
      tau_.push_back(tau);
      rank_ = s + 1;
    }
  }

  std::size_t rows_;
  std::size_t cols_;
  std::size_t rank_ = 0;
  std::vector<double> qr_;       // R on and above the diagonal, column-major
  std::vector<double> scale_;    // column j of A was multiplied by scale_[j]
  std::vector<std::size_t> perm_;  // column s of R is column perm_[s] of A
  std::vector<std::vector<double>> reflectors_;
  std::vector<double> tau_;
};

// One-shot convenience: the least-squares coefficients of a (row-major).
inline std::vector<double> qr_least_squares(absl::Span<const double> a, std::size_t rows, std::size_t cols,
                                         absl::Span<const double> b) {
  return PivotedQr(a, rows, cols).solve(b);
}

}  // namespace trainscope::scaling::detail

#endif  // TRAINSCOPE_SRC_SCALING_LEAST_SQUARES_HPP_
