// The scaling modelers on functions with known answers. Agreement with
// Extra-P itself, coefficient by coefficient, is tested in
// tests/python/test_model_vs_extrap.py against the real `extrap` package.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scaling/extrap_internal.hpp"
#include "scaling/lapack_lstsq.hpp"
#include "scaling/svd_solve.hpp"
#include "trainscope/scaling/extrap_modeler.hpp"
#include "trainscope/scaling/model.hpp"
#include "trainscope/scaling/modeler.hpp"
#include "trainscope/scaling/run_input.hpp"

namespace sc = trainscope::scaling;
using ::testing::HasSubstr;

namespace {

template <typename F>
sc::Series series_1d(const std::vector<double>& xs, F f, int repetitions = 1, double noise = 0,
                     unsigned seed = 1) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> gauss(0, 1);
  sc::Series s;
  s.callpath = "epoch";
  s.metric = "time";
  for (double x : xs) {
    sc::Point p;
    p.coordinate = {x};
    for (int r = 0; r < repetitions; ++r) p.values.push_back(f(x) * (1 + noise * gauss(rng)));
    s.points.push_back(p);
  }
  return s;
}

const std::vector<double> kRanks = {2, 4, 8, 16, 32};

sc::Model fit_ok(const std::vector<std::string>& params, const sc::Series& s,
                 const sc::ModelOptions& o = {}) {
  absl::StatusOr<sc::Model> m = sc::fit(params, s, o);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : sc::Model{};
}

sc::ModelOptions extrap() {
  sc::ModelOptions o;
  o.modeler = sc::Modeler::kExtrap;
  return o;
}

TEST(ScalingModel, ExponentsPrintAsExtraP) {
  EXPECT_EQ(sc::Exponent::Fraction(2, 4).text, "1/2");
  EXPECT_EQ(sc::Exponent::Fraction(-3, 1).text, "-3");
  EXPECT_EQ(sc::Exponent::Fraction(1, -4).text, "-1/4");
  EXPECT_DOUBLE_EQ(sc::Exponent::Fraction(1, 3).value, 1.0 / 3.0);
  EXPECT_EQ(sc::Exponent::Number(0.5).text, "0.5");
  EXPECT_EQ(sc::Exponent::Number(2).text, "2.0");
}

TEST(ScalingModel, FormulaPythonAndCppForms) {
  sc::Model m;
  m.parameters = {"p", "q"};
  m.constant = 100;
  sc::Term t;
  t.coefficient = -2.5;
  t.factors = {{0, sc::Exponent::Fraction(1, 2), sc::Exponent{}},
               {1, sc::Exponent{}, sc::Exponent::Fraction(1, 1)}};
  m.terms = {t};
  EXPECT_EQ(m.formula(), "100.0 + -2.5 * p^(1/2) * log2(q)^(1)");
  EXPECT_EQ(m.python(), "100.0-2.5*p**(1/2)*log2(q)**(1)");
  EXPECT_EQ(m.cpp(), "100.0-2.5*std::pow(p, 0.5)*std::pow(std::log2(q), 1.0)");
  const std::vector<double> at = {16, 8};
  EXPECT_DOUBLE_EQ(m.evaluate(at), 100 - 2.5 * 4 * 3);

  sc::Model constant;
  constant.constant = 0;
  EXPECT_EQ(constant.formula(), "0.0");
  EXPECT_TRUE(constant.is_constant());
}

TEST(ExtrapModeler, RecoversWeakScalingTermExactly) {
  const sc::Series s = series_1d(kRanks, [](double p) { return 3 + 0.25 * p * std::log2(p); });
  const sc::Model m = fit_ok({"p"}, s, extrap());
  ASSERT_EQ(m.terms.size(), 1u) << m.formula();
  ASSERT_EQ(m.terms[0].factors.size(), 1u);
  EXPECT_EQ(m.terms[0].factors[0].poly.text, "1");
  EXPECT_EQ(m.terms[0].factors[0].log.text, "1");
  EXPECT_NEAR(m.constant, 3, 1e-9);
  EXPECT_NEAR(m.terms[0].coefficient, 0.25, 1e-12);
  EXPECT_NEAR(m.costs.smape, 0, 1e-9);  // leave-one-out of an exact fit
  EXPECT_TRUE(m.warnings.empty());
}

TEST(ExtrapModeler, ConstantDataGivesConstantModel) {
  const sc::Series s = series_1d(kRanks, [](double) { return 7.5; });
  const sc::Model m = fit_ok({"p"}, s, extrap());
  EXPECT_TRUE(m.is_constant());
  EXPECT_EQ(m.constant, 7.5);
  EXPECT_EQ(m.costs.rss, 0);
  EXPECT_EQ(m.costs.ar2, 1);
}

TEST(ExtrapModeler, DefaultMissesStrongScalingAndNegativeExponentsFindIt) {
  const sc::Series s = series_1d(
      kRanks, [](double p) { return 2 + 100 / p; }, 3, 0.01);
  const sc::Model plain = fit_ok({"p"}, s, extrap());
  for (const sc::Term& t : plain.terms) {
    for (const sc::Factor& f : t.factors) EXPECT_GE(f.poly.value, 0) << plain.formula();
  }
  sc::ModelOptions o = extrap();
  ASSERT_TRUE(o.extrap.set("allow_negative_exponents", "True").ok());
  const sc::Model negative = fit_ok({"p"}, s, o);
  ASSERT_EQ(negative.terms.size(), 1u) << negative.formula();
  EXPECT_EQ(negative.terms[0].factors[0].poly.text, "-1");
  EXPECT_NEAR(negative.terms[0].coefficient, 100, 3);
  EXPECT_NEAR(negative.constant, 2, 0.3);
}

TEST(TrainscopeModeler, StrongScalingByDefaultAndPositiveWhenExtrapolated) {
  const std::vector<double> ranks = {1, 2, 4, 8, 16};
  const sc::Series s = series_1d(
      ranks, [](double p) { return 2 + 100 / p; }, 3, 0.01, 7);
  const sc::Model m = fit_ok({"p"}, s);
  ASSERT_EQ(m.terms.size(), 1u) << m.formula();
  EXPECT_LT(m.terms[0].factors[0].poly.value, 0) << m.formula();
  for (double p = 1; p <= 64; p *= 2) {
    const std::vector<double> at = {p};
    EXPECT_GT(m.evaluate(at), 0) << "p=" << p << " " << m.formula();
  }
}

TEST(TrainscopeModeler, RejectsModelsThatTurnNegativeInTheExtrapolationRange) {
  // Decreasing and positive where measured; the exact fit 12 - 2*log2(p)
  // reaches zero at p = 64, inside the vetted range (8x the largest point).
  const sc::Series s = series_1d(
      kRanks, [](double p) { return 12 - 2 * std::log2(p); }, 1, 0.0);
  const sc::Model exact = fit_ok({"p"}, s, extrap());
  ASSERT_EQ(exact.terms.size(), 1u) << exact.formula();
  EXPECT_EQ(exact.terms[0].factors[0].log.text, "1");  // Extra-P takes it, sign and all
  EXPECT_LE(exact.evaluate(std::vector<double>{128}), 0);

  sc::ModelOptions o;
  o.negative_exponents = false;  // only the physical check differs from Extra-P
  const sc::Model m = fit_ok({"p"}, s, o);
  for (double p = 2; p <= 4 * 32; p *= 2) {
    EXPECT_GT(m.evaluate(std::vector<double>{p}), 0) << "p=" << p << ": " << m.formula();
  }
  o.reject_nonphysical = false;
  // the same model (trainscope solves with a Jacobi SVD, Extra-P's numpy with
  // LAPACK's dgelsd: the last bits may differ)
  const sc::Model unchecked = fit_ok({"p"}, s, o);
  ASSERT_EQ(unchecked.terms.size(), 1u) << unchecked.formula();
  EXPECT_EQ(unchecked.terms[0].factors[0].log.text, "1");
  EXPECT_EQ(unchecked.terms[0].factors[0].poly.text, exact.terms[0].factors[0].poly.text);
  EXPECT_NEAR(unchecked.constant, exact.constant, 1e-12);
  EXPECT_NEAR(unchecked.terms[0].coefficient, exact.terms[0].coefficient, 1e-12);
}

TEST(TrainscopeModeler, KeepsLogTermsWhenTheSmallestPointIsOne) {
  // Extra-P drops every log term once negative exponents are on and a point
  // is 1 (log2(1)^-1 is undefined); only the negative log exponents are.
  const sc::Series s = series_1d(
      {1, 2, 4, 8, 16, 32}, [](double p) { return 5 + 3 * std::log2(p); }, 2, 0.005);
  const sc::Model ours = fit_ok({"p"}, s);
  ASSERT_EQ(ours.terms.size(), 1u) << ours.formula();
  EXPECT_EQ(ours.terms[0].factors[0].log.text, "1") << ours.formula();
  EXPECT_TRUE(ours.warnings.empty());

  sc::ModelOptions o = extrap();
  o.extrap.allow_negative_exponents = true;
  const sc::Model theirs = fit_ok({"p"}, s, o);
  ASSERT_FALSE(theirs.warnings.empty());
  EXPECT_THAT(theirs.warnings.front(), HasSubstr("below one"));
}

TEST(ExtrapModeler, TooFewPointsIsAClearError) {
  const sc::Series s = series_1d({2, 4}, [](double p) { return p; });
  absl::StatusOr<sc::Model> m = sc::fit_extrap({"p"}, s);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("at least 3"));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("'p'"));
}

TEST(ExtrapModeler, FewerThanFivePointsWarnsAsExtraP) {
  const sc::Series s = series_1d({2, 4, 8, 16}, [](double p) { return 1 + p; });
  const sc::Model m = fit_ok({"p"}, s, extrap());
  ASSERT_FALSE(m.warnings.empty());
  EXPECT_THAT(m.warnings.front(), HasSubstr("at least 5"));
}

// Issue 26: 3 points fell back to a constant printed with "adj. R^2 1" and
// Extra-P's jargon only. A fit on fewer than 5 distinct values of a parameter
// is marked and says so first, in plain words; a constant that misses the
// points has an adjusted R^2 of 0.
TEST(ScalingModel, TooFewPointsSaysSoInPlainWords) {
  // Time that may grow with batch size, too noisily for 3 points to tell.
  sc::Series s;
  s.points = {{{32}, {0.01, 0.02}}, {{64}, {0.012, 0.025}}, {{128}, {0.04, 0.01}}};
  for (const sc::ModelOptions& options : {sc::ModelOptions{}, extrap()}) {
    const sc::Model m = fit_ok({"batch_size"}, s, options);
    EXPECT_TRUE(m.too_few_points) << m.formula();
    ASSERT_FALSE(m.warnings.empty());
    EXPECT_THAT(m.warnings.front(),
                HasSubstr("too few points to tell how the value scales with batch_size (3 "
                          "distinct values: 32, 64, 128)"));
    EXPECT_THAT(m.warnings.front(), HasSubstr("at least 5"));
    EXPECT_THAT(m.warnings.front(), HasSubstr("Measure 2 more values of batch_size"));
    for (const std::string& w : m.warnings) {
      EXPECT_THAT(w, ::testing::Not(HasSubstr("Number of measurements"))) << w;
    }
    if (m.is_constant()) {
      EXPECT_THAT(m.warnings.front(), HasSubstr("explains none of their variation"));
      EXPECT_EQ(m.costs.ar2, 0) << "a constant that misses the points explains nothing";
    }
  }
  // The default modeler keeps the constant here (the F-test against the
  // repetitions' spread): the case of the issue.
  EXPECT_TRUE(fit_ok({"batch_size"}, s).is_constant());

  // Five values are enough; a constant on points that do not vary fits them all.
  const sc::Model enough = fit_ok({"p"}, series_1d(kRanks, [](double p) { return 1 + p; }));
  EXPECT_FALSE(enough.too_few_points);
  const sc::Model flat = fit_ok({"p"}, series_1d(kRanks, [](double) { return 3.0; }));
  EXPECT_TRUE(flat.is_constant());
  EXPECT_FALSE(flat.too_few_points);
  EXPECT_EQ(flat.costs.ar2, 1);
  EXPECT_THAT(sc::too_few_values(series_1d({1, 2, 2, 4}, [](double) { return 1.0; }), 1),
              ::testing::ElementsAre(::testing::Pair(0, ::testing::ElementsAre(1, 2, 4))));
}

TEST(ExtrapModeler, BadSeriesAreErrorsNamingTheProblem) {
  sc::Series s = series_1d(kRanks, [](double p) { return p; });
  s.points[1].coordinate = {1, 2};
  EXPECT_THAT(std::string(sc::fit_extrap({"p"}, s).status().message()),
              HasSubstr("point 2 has 2 coordinates"));
  s = series_1d(kRanks, [](double p) { return p; });
  s.points[3].values.push_back(std::nan(""));
  EXPECT_THAT(std::string(sc::fit_extrap({"p"}, s).status().message()),
              HasSubstr("non-finite value"));
  s.points.clear();
  EXPECT_FALSE(sc::fit_extrap({"p"}, s).ok());
  EXPECT_FALSE(
      sc::fit_extrap({"a", "b", "c", "d", "e"}, series_1d(kRanks, [](double p) { return p; }))
          .ok());
}

TEST(ExtrapOptions, SetParsesExtraPValuesAndRejectsTypos) {
  sc::ExtrapOptions o;
  EXPECT_TRUE(o.set("allow_log_terms", "False").ok());
  EXPECT_FALSE(o.allow_log_terms);
  EXPECT_TRUE(o.set("compare_with_RSS", "on").ok());
  EXPECT_TRUE(o.compare_with_RSS);
  EXPECT_TRUE(o.set("minimum_term_contribution", "0.01").ok());
  EXPECT_EQ(o.minimum_term_contribution, 0.01);
  EXPECT_TRUE(o.set("single_parameter_point_selection", "smallest").ok());
  const absl::Status typo = o.set("allow_negative_exponent", "True");
  EXPECT_THAT(std::string(typo.message()),
              HasSubstr("unknown modeler option 'allow_negative_exponent'"));
  EXPECT_THAT(std::string(o.set("allow_log_terms", "maybe").message()), HasSubstr("not a boolean"));
  EXPECT_FALSE(o.set("single_parameter_point_selection", "largest").ok());
  EXPECT_FALSE(o.set("minimum_term_contribution", "-1").ok());
}

TEST(ScalingNames, ParseTheNamesTheCliAndPythonAccept) {
  EXPECT_EQ(*sc::parse_measure("Median"), sc::Measure::kMedian);
  EXPECT_EQ(*sc::parse_measure("min"), sc::Measure::kMinimum);
  EXPECT_THAT(std::string(sc::parse_measure("avg").status().message()),
              HasSubstr("use mean, median"));
  EXPECT_EQ(*sc::parse_modeler("EXTRAP"), sc::Modeler::kExtrap);
  EXPECT_EQ(*sc::parse_modeler("default"), sc::Modeler::kTrainscope);
  EXPECT_FALSE(sc::parse_modeler("extra-p").ok());
  EXPECT_EQ(*sc::parse_rank_aggregation("Max"), sc::RankAggregation::kMax);
  EXPECT_FALSE(sc::parse_rank_aggregation("median").ok());
}

TEST(ExtrapModeler, CustomExponentsRestrictTheSearch) {
  const sc::Series s = series_1d(
      kRanks, [](double p) { return 1 + 0.5 * p * p; }, 2, 0.01);
  sc::ModelOptions o = extrap();
  ASSERT_TRUE(o.extrap.set("poly_exponents", "1,3").ok());
  const sc::Model m = fit_ok({"p"}, s, o);
  ASSERT_EQ(m.terms.size(), 1u);
  const std::string poly = m.terms[0].factors[0].poly.text;
  EXPECT_TRUE(poly == "1" || poly == "3") << m.formula();
}

TEST(ExtrapModeler, LogTermsDroppedBelowOneWithAWarning) {
  const sc::Series s = series_1d(
      {0.25, 0.5, 1, 2, 4}, [](double x) { return 1 + 3 * x; }, 1);
  const sc::Model m = fit_ok({"x"}, s, extrap());
  ASSERT_FALSE(m.warnings.empty());
  EXPECT_THAT(m.warnings.front(), HasSubstr("below one"));
  for (const sc::Term& t : m.terms) {
    for (const sc::Factor& f : t.factors) EXPECT_TRUE(f.log.is_zero());
  }
}

TEST(ExtrapModeler, MedianMeasureIgnoresAnOutlierRepetition) {
  sc::Series s = series_1d(
      kRanks, [](double p) { return 1 + 2 * p; }, 3);
  s.points[2].values[0] *= 50;  // one bad repetition
  sc::ModelOptions o = extrap();
  o.extrap.measure = sc::Measure::kMedian;
  const sc::Model m = fit_ok({"p"}, s, o);
  ASSERT_EQ(m.terms.size(), 1u) << m.formula();
  EXPECT_NEAR(m.terms[0].coefficient, 2, 1e-9);
  EXPECT_EQ(sc::measure_of(std::vector<double>{3, 1, 2, 10}, sc::Measure::kMedian), 2.5);
}

sc::Series grid(double (*f)(double, double)) {
  sc::Series s;
  s.callpath = "step";
  s.metric = "time";
  for (double p : {2.0, 4.0, 8.0, 16.0, 32.0}) {
    for (double q : {10.0, 20.0, 40.0, 80.0, 160.0}) s.points.push_back({{p, q}, {f(p, q)}});
  }
  return s;
}

TEST(ExtrapModeler, MultiParameterProduct) {
  const sc::Series s = grid([](double p, double q) { return 3 + 0.5 * p * std::log2(q); });
  const sc::Model m = fit_ok({"p", "q"}, s, extrap());
  ASSERT_EQ(m.terms.size(), 1u) << m.formula();
  ASSERT_EQ(m.terms[0].factors.size(), 2u) << m.formula();
  EXPECT_EQ(m.terms[0].factors[0].parameter, 0);
  EXPECT_EQ(m.terms[0].factors[0].poly.text, "1");
  EXPECT_EQ(m.terms[0].factors[1].parameter, 1);
  EXPECT_EQ(m.terms[0].factors[1].log.text, "1");
  EXPECT_NEAR(m.terms[0].coefficient, 0.5, 1e-9);
  EXPECT_NEAR(m.constant, 3, 1e-9);
}

TEST(ExtrapModeler, MultiParameterSum) {
  const sc::Series s = grid([](double p, double q) { return 1 + 2 * p + 0.01 * q * q; });
  const sc::Model m = fit_ok({"p", "q"}, s, extrap());
  ASSERT_EQ(m.terms.size(), 2u) << m.formula();
  EXPECT_NEAR(m.evaluate(std::vector<double>{64, 320}), 1 + 128 + 0.01 * 320 * 320, 1e-6);
}

TEST(ExtrapModeler, MultiParameterWithOneConstantParameter) {
  const sc::Series s = grid([](double p, double) { return 4 + 3 * p; });
  const sc::Model m = fit_ok({"p", "q"}, s, extrap());
  ASSERT_EQ(m.terms.size(), 1u) << m.formula();
  ASSERT_EQ(m.terms[0].factors.size(), 1u);
  EXPECT_EQ(m.terms[0].factors[0].parameter, 0);
  EXPECT_NEAR(m.terms[0].coefficient, 3, 1e-9);
}

// --- numpy's least squares, exact ties, parsimony (issue 14) ---------------------------------

namespace detail = trainscope::scaling::detail;

TEST(LapackLeastSquares, LosesTheDigitsNumpyLosesOnBadlyScaledColumns) {
  // [1, log2(p), n^3 * log2(n)] on a 5x5 grid (condition number ~3e13), as in
  // Extra-P's relearn_data.txt. numpy 1.26 (OpenBLAS, baseline kernel):
  // lstsq(A, y, None)[0]; the exact solution's last coefficient differs in the
  // 4th digit, and trainscope must make the model Extra-P makes.
  std::vector<double> a, y;
  int i = 0;
  for (double p : {32.0, 64.0, 128.0, 256.0, 512.0}) {
    for (double n : {5000.0, 6000.0, 7000.0, 8000.0, 9000.0}) {
      const double big = n * n * n * std::log2(n);
      a.insert(a.end(), {1.0, std::log2(p), big});
      y.push_back(0.001 + 0.0015 * std::log2(p) + 1e-16 * big + 1e-4 * std::sin(i++));
    }
  }
  const detail::LeastSquares numpy = detail::lapack_least_squares(a, 25, 3, y);
  EXPECT_EQ(numpy.rank, 3u);
  EXPECT_NEAR(numpy.x[0], 0.001063645766539506, 1e-12 * 0.001063645766539506);
  EXPECT_NEAR(numpy.x[1], 0.0014913749664311866, 1e-12 * 0.0014913749664311866);
  EXPECT_NEAR(numpy.x[2], 9.93129189996722e-17, 1e-9 * 9.93129189996722e-17);
}

TEST(LapackLeastSquares, SolvesWellConditionedSystemsLikeTheSvd) {
  // 5 x 4: no QR first (5 < int(1.6 * 4)); numpy: lstsq(B, y, None)[0]
  const std::vector<double> b = {1, 2,     3, 4, 1,  3,    5, 7.5, 1,  4,
                                 9, 16.25, 1, 5, 11, 30.0, 1, 6,   13, 35};
  const std::vector<double> y = {1, 2, 4, 3, 5};
  const detail::LeastSquares numpy = detail::lapack_least_squares(b, 5, 4, y);
  const std::vector<double> expected = {-2.4943538268506766, 1.1389585947302365, 0.5870451693851939,
                                        -0.2089084065244664};
  const detail::LeastSquares svd = detail::solve_least_squares(b, 5, 4, y);
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_NEAR(numpy.x[k], expected[k], 1e-13 * std::abs(expected[k])) << k;
    EXPECT_NEAR(svd.x[k], expected[k], 1e-11 * std::abs(expected[k])) << k;
  }
  // rank-deficient: a repeated column; numpy reports rank 1 and the minimum-norm solution
  const detail::LeastSquares deficient =
      detail::lapack_least_squares({1, 1, 2, 2, 3, 3}, 3, 2, {1, 2, 3});
  EXPECT_EQ(deficient.rank, 1u);
  EXPECT_NEAR(deficient.x[0], 0.5, 1e-14);
  EXPECT_NEAR(deficient.x[1], 0.5, 1e-14);
}

TEST(ExactTies, CostsEqualToNineDigitsAreATieAndTheEarlierStays) {
  EXPECT_TRUE(detail::clearly_lower(1.0, 1.1));
  EXPECT_FALSE(detail::clearly_lower(1.1, 1.0));
  EXPECT_FALSE(detail::clearly_lower(0.5084779192368009, 0.508477919236844));  // numpy's noise
  EXPECT_TRUE(detail::clearly_lower(0.50847, 0.50848));
  EXPECT_FALSE(detail::clearly_lower(1e-15, 3e-15));  // exact fits: both zero
  EXPECT_TRUE(detail::clearly_lower(1.0, std::numeric_limits<double>::infinity()));
}

TEST(ExactTies, OnACrossTheAdditiveHypothesisIsKept) {
  // One line per parameter through (8, 64): c + a*log2(p) + b*q and the
  // combinations with log2(p)*q are the same function on these points.
  sc::Series s;
  s.callpath = "main";
  s.metric = "time";
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> noise(-0.02, 0.02);
  auto add = [&](double p, double q) {
    const double f = 5 + 2 * std::log2(p) + 0.05 * q;
    s.points.push_back({{p, q}, {f * (1 + noise(rng)), f * (1 + noise(rng))}});
  };
  for (double p : {2.0, 4.0, 8.0, 16.0, 32.0}) add(p, 64);
  for (double q : {16.0, 32.0, 128.0, 256.0}) add(8, q);
  const sc::Model m = fit_ok({"p", "q"}, s, extrap());
  ASSERT_EQ(m.terms.size(), 2u) << m.formula();
  for (const sc::Term& t : m.terms) EXPECT_EQ(t.factors.size(), 1u) << m.formula();
}

TEST(Parsimony, FDistributionTailMatchesTables) {
  EXPECT_NEAR(detail::f_distribution_upper(4.3512435, 1, 20), 0.05, 1e-6);
  EXPECT_NEAR(detail::f_distribution_upper(10.127964, 1, 3), 0.05, 1e-6);
  EXPECT_NEAR(detail::f_distribution_upper(8.0959598, 1, 20), 0.01, 1e-6);
  EXPECT_EQ(detail::f_distribution_upper(0, 1, 5), 1);
}

TEST(Parsimony, AConstantWithOnePercentNoiseIsAConstant) {
  int constants = 0, extrap_terms = 0;
  for (unsigned seed = 1; seed <= 20; ++seed) {
    const sc::Series s = series_1d(
        kRanks, [](double) { return 7.0; }, 5, 0.01, seed);
    const sc::Model ours = fit_ok({"p"}, s);
    constants += ours.is_constant() ? 1 : 0;
    sc::ModelOptions no_test;
    no_test.significance = 0;
    extrap_terms += fit_ok({"p"}, s, no_test).is_constant() ? 0 : 1;
  }
  EXPECT_GE(constants, 18);    // a 5% test: about one in twenty keeps a term
  EXPECT_GE(extrap_terms, 5);  // without the test the noise is modeled
}

TEST(Parsimony, RealTrendsKeepTheirTerm) {
  for (unsigned seed = 1; seed <= 10; ++seed) {
    const sc::Model strong =
        fit_ok({"p"}, series_1d(
                          kRanks, [](double p) { return 2 + 100 / p; }, 5, 0.03, seed));
    EXPECT_FALSE(strong.is_constant()) << strong.formula();
    const sc::Model weak =
        fit_ok({"p"}, series_1d(
                          kRanks, [](double p) { return 10 + 0.2 * p; }, 5, 0.01, seed));
    EXPECT_FALSE(weak.is_constant()) << weak.formula();
  }
  // one repetition per point: the noise comes from the residuals
  const sc::Model single = fit_ok({"p"}, series_1d(
                                             kRanks, [](double p) { return 3 + 0.5 * p; }, 1, 0.0));
  EXPECT_FALSE(single.is_constant()) << single.formula();
}

}  // namespace
