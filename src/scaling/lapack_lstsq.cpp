// LAPACK's dgelsd as numpy.linalg.lstsq calls it (one right-hand side), from
// the reference routines: dgelsd, dgeqr2, dorm2r, dgebd2, dorml2, dlarfg,
// dlarf, dlapy2, dlascl and dlalsd's small-matrix path. Householder steps in
// LAPACK's order of operations; the nrm2 as OpenBLAS's x86-64 kernel does it
// (sum of squares in extended precision). The square upper-bidiagonal system
// dlalsd solves through its SVD is solved by back substitution when it has
// full rank under the rcond cutoff (the same solution; the singular values
// decide the rank), by a Jacobi SVD otherwise.
#include "scaling/lapack_lstsq.hpp"
#include "trainscope/stats/numbers.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace trainscope::scaling::detail {

namespace {

constexpr double kEpsilon = std::numeric_limits<double>::epsilon() / 2;  // dlamch('E')
constexpr double kPrecision = std::numeric_limits<double>::epsilon();    // dlamch('P')
constexpr double kSafeMin = std::numeric_limits<double>::min();          // dlamch('S')

// Column-major matrix view: element (i, j) at data[i + j * ld].
struct Matrix {
  std::vector<double> data;
  std::size_t rows = 0, cols = 0;
  double& operator()(std::size_t i, std::size_t j) { return data[i + j * rows]; }
  double operator()(std::size_t i, std::size_t j) const { return data[i + j * rows]; }
};

double nrm2(std::size_t n, const double* x, std::size_t inc) {
  long double sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const long double v = x[i * inc];
    sum += v * v;
  }
  return static_cast<double>(std::sqrt(sum));
}

double lapy2(double x, double y) {
  const double xabs = std::abs(x), yabs = std::abs(y);
  const double w = std::max(xabs, yabs), z = std::min(xabs, yabs);
  if (z == 0 || w > std::numeric_limits<double>::max()) return w;
  return w * std::sqrt(1 + (z / w) * (z / w));
}

// dlascl('G'): multiplies x[0..n) by cto / cfrom without over- or underflow.
void lascl(double cfrom, double cto, double* x, std::size_t n, std::size_t inc = 1) {
  const double smlnum = kSafeMin, bignum = 1 / smlnum;
  double cfromc = cfrom, ctoc = cto;
  bool done = false;
  while (!done) {
    const double cfrom1 = cfromc * smlnum;
    double mul;
    if (cfrom1 == cfromc) {
      mul = ctoc / cfromc;
      done = true;
    } else {
      const double cto1 = ctoc / bignum;
      if (cto1 == ctoc) {
        mul = ctoc;
        done = true;
        cfromc = 1;
      } else if (std::abs(cfrom1) > std::abs(ctoc) && ctoc != 0) {
        mul = smlnum;
        cfromc = cfrom1;
      } else if (std::abs(cto1) > std::abs(cfromc)) {
        mul = bignum;
        ctoc = cto1;
      } else {
        mul = ctoc / cfromc;
        done = true;
        if (mul == 1) return;
      }
    }
    for (std::size_t i = 0; i < n; ++i) x[i * inc] *= mul;
  }
}

// dlarfg: the reflector that zeroes x (n - 1 entries at stride inc) below alpha.
double larfg(std::size_t n, double& alpha, double* x, std::size_t inc) {
  if (n <= 1) return 0;
  double xnorm = nrm2(n - 1, x, inc);
  if (xnorm == 0) return 0;
  double beta = -std::copysign(lapy2(alpha, xnorm), alpha);
  const double safmin = kSafeMin / kEpsilon;
  int knt = 0;
  if (std::abs(beta) < safmin) {
    const double rsafmn = 1 / safmin;
    do {
      ++knt;
      for (std::size_t i = 0; i + 1 < n; ++i) x[i * inc] *= rsafmn;
      beta *= rsafmn;
      alpha *= rsafmn;
    } while (std::abs(beta) < safmin && knt < 20);
    xnorm = nrm2(n - 1, x, inc);
    beta = -std::copysign(lapy2(alpha, xnorm), alpha);
  }
  const double tau = (beta - alpha) / beta;
  const double scale = 1 / (alpha - beta);
  for (std::size_t i = 0; i + 1 < n; ++i) x[i * inc] *= scale;
  for (int j = 0; j < knt; ++j) beta *= safmin;
  alpha = beta;
  return tau;
}

// dlarf('Left'): C(r0.., c0..) (m x n) := (I - tau v v^T) C, v (m entries, stride inc).
void larf_left(const double* v, std::size_t inc, double tau, Matrix& c, std::size_t r0,
               std::size_t c0, std::size_t m, std::size_t n) {
  if (tau == 0) return;
  std::vector<double> w(n, 0.0);
  for (std::size_t j = 0; j < n; ++j) {
    double temp = 0;
    for (std::size_t i = 0; i < m; ++i) temp += c(r0 + i, c0 + j) * v[i * inc];
    w[j] = temp;
  }
  for (std::size_t j = 0; j < n; ++j) {
    if (w[j] == 0) continue;
    const double temp = -tau * w[j];
    for (std::size_t i = 0; i < m; ++i) c(r0 + i, c0 + j) += v[i * inc] * temp;
  }
}

// dlarf('Right'): C (m x n) := C (I - tau v v^T), v (n entries, stride inc).
void larf_right(const double* v, std::size_t inc, double tau, Matrix& c, std::size_t r0,
                std::size_t c0, std::size_t m, std::size_t n) {
  if (tau == 0) return;
  std::vector<double> w(m, 0.0);
  for (std::size_t j = 0; j < n; ++j) {
    const double temp = v[j * inc];
    if (temp == 0) continue;
    for (std::size_t i = 0; i < m; ++i) w[i] += temp * c(r0 + i, c0 + j);
  }
  for (std::size_t j = 0; j < n; ++j) {
    if (v[j * inc] == 0) continue;
    const double temp = -tau * v[j * inc];
    for (std::size_t i = 0; i < m; ++i) c(r0 + i, c0 + j) += w[i] * temp;
  }
}

// Applies the reflector stored in column `col` of `a` from row `row` down
// (implicit 1 at the top) to the vector b[row..rows).
void apply_column_reflector(Matrix& a, std::size_t row, std::size_t col, double tau,
                            std::vector<double>& b, std::size_t rows) {
  const double saved = a(row, col);
  a(row, col) = 1;
  Matrix view{std::vector<double>(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(rows)), rows,
              1};
  larf_left(&a(row, col), 1, tau, view, row, 0, rows - row, 1);
  std::copy(view.data.begin(), view.data.end(), b.begin());
  a(row, col) = saved;
}

}  // namespace

LeastSquares lapack_least_squares(const std::vector<double>& a_in, std::size_t m, std::size_t n,
                                  const std::vector<double>& b_in, double rcond) {
  if (m < n || n == 0) return solve_least_squares(a_in, m, n, b_in, rcond);
  const double numpy_rcond = rcond == 0 ? kPrecision * static_cast<double>(std::max(m, n)) : rcond;
  const double rcnd = (numpy_rcond <= 0 || numpy_rcond >= 1) ? kEpsilon : numpy_rcond;

  Matrix a{std::vector<double>(m * n), m, n};
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) a(i, j) = a_in[i * n + j];
  }
  std::vector<double> b(b_in.begin(), b_in.end());
  LeastSquares result;
  result.x.assign(n, 0.0);

  // dgelsd: scale A and B into range
  const double smlnum = kSafeMin / kPrecision, bignum = 1 / smlnum;
  double anrm = 0;
  for (double v : a.data) anrm = std::max(anrm, std::abs(v));
  if (std::isnan(anrm)) {
    result.x.assign(n, stats::kNaN);
    return result;
  }
  int iascl = 0;
  if (anrm > 0 && anrm < smlnum) {
    lascl(anrm, smlnum, a.data.data(), a.data.size());
    iascl = 1;
  } else if (anrm > bignum) {
    lascl(anrm, bignum, a.data.data(), a.data.size());
    iascl = 2;
  } else if (anrm == 0) {
    return result;
  }
  double bnrm = 0;
  for (double v : b) bnrm = std::max(bnrm, std::abs(v));
  int ibscl = 0;
  if (bnrm > 0 && bnrm < smlnum) {
    lascl(bnrm, smlnum, b.data(), m);
    ibscl = 1;
  } else if (bnrm > bignum) {
    lascl(bnrm, bignum, b.data(), m);
    ibscl = 2;
  }

  // Path 1a: QR first when m >= mnthr = int(1.6 * n)
  std::size_t mm = m;
  const std::size_t mnthr = static_cast<std::size_t>(static_cast<float>(n) * 1.6F);
  if (m >= mnthr) {
    mm = n;
    std::vector<double> tau(n, 0.0);
    for (std::size_t i = 0; i < n; ++i) {  // dgeqr2
      tau[i] = larfg(m - i, a(i, i), i + 1 < m ? &a(i + 1, i) : &a(i, i), 1);
      if (i + 1 < n) {
        const double aii = a(i, i);
        a(i, i) = 1;
        larf_left(&a(i, i), 1, tau[i], a, i, i + 1, m - i, n - i - 1);
        a(i, i) = aii;
      }
    }
    for (std::size_t i = 0; i < n; ++i) apply_column_reflector(a, i, i, tau[i], b, m);  // dorm2r
    for (std::size_t j = 0; j < n; ++j) {
      for (std::size_t i = j + 1; i < m; ++i) a(i, j) = 0;
    }
  }

  // dgebd2 on the leading mm x n block (upper bidiagonal, mm >= n)
  Matrix r{std::vector<double>(mm * n), mm, n};
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t i = 0; i < mm; ++i) r(i, j) = a(i, j);
  }
  std::vector<double> d(n), e(n > 1 ? n - 1 : 0), tauq(n), taup(n);
  for (std::size_t i = 0; i < n; ++i) {
    tauq[i] = larfg(mm - i, r(i, i), i + 1 < mm ? &r(i + 1, i) : &r(i, i), 1);
    d[i] = r(i, i);
    r(i, i) = 1;
    if (i + 1 < n) larf_left(&r(i, i), 1, tauq[i], r, i, i + 1, mm - i, n - i - 1);
    r(i, i) = d[i];
    if (i + 1 < n) {
      taup[i] = larfg(n - i - 1, r(i, i + 1), i + 2 < n ? &r(i, i + 2) : &r(i, i + 1), mm);
      e[i] = r(i, i + 1);
      r(i, i + 1) = 1;
      larf_right(&r(i, i + 1), mm, taup[i], r, i + 1, i + 1, mm - i - 1, n - i - 1);
      r(i, i + 1) = e[i];
    } else {
      taup[i] = 0;
    }
  }
  for (std::size_t i = 0; i < n; ++i)
    apply_column_reflector(r, i, i, tauq[i], b, mm);  // dormbr Q^T

  // dlalsd, small path: scale, solve the bidiagonal system, unscale
  std::vector<double> y(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
  if (n == 1) {
    if (d[0] != 0) {
      result.rank = 1;
      lascl(d[0], 1, y.data(), 1);
    } else {
      y[0] = 0;
    }
  } else {
    double orgnrm = 0;
    for (double v : d) orgnrm = std::max(orgnrm, std::abs(v));
    for (double v : e) orgnrm = std::max(orgnrm, std::abs(v));
    if (orgnrm == 0) {
      std::fill(y.begin(), y.end(), 0.0);
    } else {
      lascl(orgnrm, 1, d.data(), n);
      lascl(orgnrm, 1, e.data(), n - 1);
      std::vector<double> dense(n * n, 0.0);  // row-major
      for (std::size_t i = 0; i < n; ++i) {
        dense[i * n + i] = d[i];
        if (i + 1 < n) dense[i * n + i + 1] = e[i];
      }
      const SvdLeastSquares svd(dense, n, n, rcnd);
      result.rank = svd.rank();
      if (svd.rank() == n) {
        for (std::size_t k = n; k-- > 0;) {
          double value = y[k];
          if (k + 1 < n) value -= e[k] * y[k + 1];
          y[k] = value / d[k];
        }
      } else {
        y = svd.solve(y);
      }
      lascl(orgnrm, 1, y.data(), n);
    }
  }

  // dormbr P (dorml2 backwards): x = G(1) ... G(n-2) y over rows 1..n-1
  for (std::size_t i = n >= 2 ? n - 2 : 0; n >= 2;) {
    const double saved = r(i, i + 1);
    r(i, i + 1) = 1;
    Matrix view{y, n, 1};
    larf_left(&r(i, i + 1), mm, taup[i], view, i + 1, 0, n - i - 1, 1);
    y = view.data;
    r(i, i + 1) = saved;
    if (i == 0) break;
    --i;
  }

  if (iascl == 1) lascl(anrm, smlnum, y.data(), n);
  if (iascl == 2) lascl(anrm, bignum, y.data(), n);
  if (ibscl == 1) lascl(smlnum, bnrm, y.data(), n);
  if (ibscl == 2) lascl(bignum, bnrm, y.data(), n);
  result.x = std::move(y);
  return result;
}

}  // namespace trainscope::scaling::detail
