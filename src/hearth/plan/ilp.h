// A small mixed-integer linear program and its solution with COIN-OR CBC. Halda builds one
// per candidate k; nothing else in hearth needs to know about CBC.
#pragma once

#include <limits>
#include <utility>
#include <vector>

namespace hearth::plan {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

struct IlpRow {
  std::vector<std::pair<int, double>> coefs;  // (variable index, coefficient)
  double lo = -kInf;
  double hi = kInf;
};

struct Ilp {
  std::vector<double> objective;  // (vars) minimised
  std::vector<double> lower;      // (vars)
  std::vector<double> upper;      // (vars)
  std::vector<bool> integer;      // (vars)
  std::vector<IlpRow> rows;
  // false: Clp neither scales nor presolves the LPs. With both on, CBC (and Clp's own branch
  // and bound) returned a worse point as optimal for one 4-device overlap MILP whose optimum
  // they found once w was fixed; without them they find it. Halda's overlap MILP turns them
  // off (its rows are already of order one: GiB and seconds); the paper's ILPs keep them.
  bool scale = true;

  int add_var(double cost, double lo, double hi, bool is_integer);
};

struct IlpSolution {
  bool optimal = false;  // false: infeasible (or the solver gave up)
  double objective = 0;
  std::vector<double> x;  // (vars)
};

IlpSolution solve_ilp(const Ilp& ilp);

}  // namespace hearth::plan
