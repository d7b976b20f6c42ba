#include "hearth/plan/ilp.h"

#include <CbcModel.hpp>
#include <CoinPackedMatrix.hpp>
#include <CoinPackedVector.hpp>
#include <OsiClpSolverInterface.hpp>
#include <cmath>
#include <map>

namespace hearth::plan {

int Ilp::add_var(double cost, double lo, double hi, bool is_integer) {
  objective.push_back(cost);
  lower.push_back(lo);
  upper.push_back(hi);
  integer.push_back(is_integer);
  return static_cast<int>(objective.size()) - 1;
}

IlpSolution solve_ilp(const Ilp& ilp) {
  const int n = static_cast<int>(ilp.objective.size());
  CoinPackedMatrix matrix(false, 0, 0);  // row-ordered
  matrix.setDimensions(0, n);
  std::vector<double> row_lo, row_hi;
  for (const auto& r : ilp.rows) {
    // A variable named twice in a row (two terms of one cost) gets the sum of its coefficients:
    // CoinPackedVector refuses duplicate indices.
    std::map<int, double> merged;
    for (const auto& [idx, c] : r.coefs) merged[idx] += c;
    CoinPackedVector v;
    for (const auto& [idx, c] : merged) v.insert(idx, c);
    matrix.appendRow(v);
    row_lo.push_back(std::isinf(r.lo) ? -COIN_DBL_MAX : r.lo);
    row_hi.push_back(std::isinf(r.hi) ? COIN_DBL_MAX : r.hi);
  }
  std::vector<double> col_lo(ilp.lower), col_hi(ilp.upper);
  for (auto& x : col_lo) x = std::isinf(x) ? -COIN_DBL_MAX : x;
  for (auto& x : col_hi) x = std::isinf(x) ? COIN_DBL_MAX : x;

  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.loadProblem(matrix, col_lo.data(), col_hi.data(), ilp.objective.data(), row_lo.data(),
                     row_hi.data());
  if (!ilp.scale) {
    solver.setHintParam(OsiDoScale, false, OsiHintDo);
    solver.setHintParam(OsiDoPresolveInInitial, false, OsiHintDo);
    solver.setHintParam(OsiDoPresolveInResolve, false, OsiHintDo);
  }
  for (int i = 0; i < n; ++i) {
    if (ilp.integer[static_cast<size_t>(i)]) solver.setInteger(i);
  }
  CbcModel model(solver);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  model.solver()->messageHandler()->setLogLevel(0);
  model.initialSolve();
  model.branchAndBound();

  IlpSolution out;
  if (!model.isProvenOptimal() || model.bestSolution() == nullptr) return out;
  out.optimal = true;
  out.objective = model.getObjValue();
  out.x.assign(model.bestSolution(), model.bestSolution() + n);
  return out;
}

}  // namespace hearth::plan
