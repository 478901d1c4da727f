#include "scaling/svd_solve.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace trainscope::scaling::detail {

SvdLeastSquares::SvdLeastSquares(const std::vector<double>& a, std::size_t rows, std::size_t cols,
                                 double rcond)
    : rows_(rows), cols_(cols) {
  // Column-major working copy U (rows x cols) and V (cols x cols) = I.
  std::vector<double> u(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) u[c * rows + r] = a[r * cols + c];
  }
  std::vector<double> v(cols * cols, 0.0);
  for (std::size_t c = 0; c < cols; ++c) v[c * cols + c] = 1.0;

  constexpr double kEps = std::numeric_limits<double>::epsilon();
  for (int sweep = 0; sweep < 60; ++sweep) {
    bool rotated = false;
    for (std::size_t p = 0; p + 1 < cols; ++p) {
      for (std::size_t q = p + 1; q < cols; ++q) {
        double alpha = 0, beta = 0, gamma = 0;
        const double* up = &u[p * rows];
        const double* uq = &u[q * rows];
        for (std::size_t r = 0; r < rows; ++r) {
          alpha += up[r] * up[r];
          beta += uq[r] * uq[r];
          gamma += up[r] * uq[r];
        }
        if (gamma == 0 || std::abs(gamma) <= kEps * std::sqrt(alpha * beta)) continue;
        rotated = true;
        const double zeta = (beta - alpha) / (2 * gamma);
        const double t = std::copysign(1.0, zeta) / (std::abs(zeta) + std::sqrt(1 + zeta * zeta));
        const double cs = 1 / std::sqrt(1 + t * t);
        const double sn = cs * t;
        double* wp = &u[p * rows];
        double* wq = &u[q * rows];
        for (std::size_t r = 0; r < rows; ++r) {
          const double x = wp[r], y = wq[r];
          wp[r] = cs * x - sn * y;
          wq[r] = sn * x + cs * y;
        }
        double* vp = &v[p * cols];
        double* vq = &v[q * cols];
        for (std::size_t r = 0; r < cols; ++r) {
          const double x = vp[r], y = vq[r];
          vp[r] = cs * x - sn * y;
          vq[r] = sn * x + cs * y;
        }
      }
    }
    if (!rotated) break;
  }

  std::vector<double> sigma(cols);
  double sigma_max = 0;
  for (std::size_t c = 0; c < cols; ++c) {
    double norm = 0;
    for (std::size_t r = 0; r < rows; ++r) norm += u[c * rows + r] * u[c * rows + r];
    sigma[c] = std::sqrt(norm);
    sigma_max = std::max(sigma_max, sigma[c]);
  }
  const double cutoff_factor =
      rcond == 0 ? kEps * static_cast<double>(std::max(rows, cols)) : (rcond < 0 ? kEps : rcond);
  const double cutoff = cutoff_factor * sigma_max;
  // x = sum over kept c of (u_c . b) / sigma_c^2 * v_c, with u_c unnormalised.
  weight_.assign(cols, 0.0);
  for (std::size_t c = 0; c < cols; ++c) {
    if (!(sigma[c] > cutoff) || sigma[c] == 0) continue;
    ++rank_;
    weight_[c] = 1 / (sigma[c] * sigma[c]);
  }
  u_ = std::move(u);
  v_ = std::move(v);
}

std::vector<double> SvdLeastSquares::solve(absl::Span<const double> b) const {
  std::vector<double> x(cols_, 0.0);
  for (std::size_t c = 0; c < cols_; ++c) {
    if (weight_[c] == 0) continue;
    double dot = 0;
    for (std::size_t r = 0; r < rows_; ++r) dot += u_[c * rows_ + r] * b[r];
    const double w = dot * weight_[c];
    for (std::size_t k = 0; k < cols_; ++k) x[k] += w * v_[c * cols_ + k];
  }
  return x;
}

}  // namespace trainscope::scaling::detail
