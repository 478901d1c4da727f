// numpy.linalg.lstsq step for step: LAPACK's dgelsd (Householder QR when the
// system is tall, Householder bidiagonalization, the bidiagonal solve with
// numpy's rank cutoff). Extra-P fits with it, and on badly scaled columns
// (n^3 * log2(n) next to a constant) the Householder steps lose digits that a
// Jacobi SVD keeps: to make the models Extra-P makes, trainscope must lose the
// same digits. Only --modeler extrap uses it; trainscope's own modeler keeps
// the accurate SvdLeastSquares.
#ifndef TRAINSCOPE_SRC_SCALING_LAPACK_LSTSQ_HPP_
#define TRAINSCOPE_SRC_SCALING_LAPACK_LSTSQ_HPP_

#include <cstddef>
#include <vector>

#include "scaling/svd_solve.hpp"

namespace trainscope::scaling::detail {

// a: rows x cols, row-major; b: rows entries. rcond as SvdLeastSquares
// (0: numpy's default eps * max(rows, cols); < 0: machine epsilon).
// An underdetermined system (rows < cols) is solved by SvdLeastSquares.
LeastSquares lapack_least_squares(const std::vector<double>& a, std::size_t rows, std::size_t cols,
                                  const std::vector<double>& b, double rcond = 0.0);

}  // namespace trainscope::scaling::detail

#endif  // TRAINSCOPE_SRC_SCALING_LAPACK_LSTSQ_HPP_
