#include "tessera/balance/expr/evaluate.hpp"

#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "tessera/balance/expr/rewrite.hpp"
#include "tessera/linalg/gemm.hpp"

namespace tessera::balance::expr {

namespace {

linalg::Matrix local_product(const linalg::Matrix& a, const linalg::Matrix& b) {
  linalg::Matrix c(a.rows, b.cols);
  linalg::gemm(a.rows, b.cols, a.cols, 1.0, a.values.data(), a.cols, b.values.data(), b.cols, 0.0, c.values.data(),
               b.cols);
  return c;
}

class Evaluator {
 public:
  Evaluator(const std::map<std::string, linalg::MatrixView>& inputs, const MultiplyFn& multiply)
      : inputs_(inputs), multiply_(multiply) {}

  Result<const linalg::Matrix*> value(const Expr& e) {
    if (const auto done = values_.find(e.get()); done != values_.end()) return &done->second;
    Result<linalg::Matrix> computed = compute(e);
    if (!computed) return computed.status();
    return &values_.emplace(e.get(), std::move(*computed)).first->second;
  }

 private:
  Result<linalg::Matrix> compute(const Expr& e) {
    std::vector<const linalg::Matrix*> operands;
    for (const Expr& operand : e->operands) {
      Result<const linalg::Matrix*> value_of = value(operand);
      if (!value_of) return value_of.status();
      operands.push_back(*value_of);
    }
    switch (e->op) {
      case Op::kInput: {
        Result<linalg::MatrixView> view = input_view(e, inputs_);
        if (!view) return view.status();
        return linalg::to_matrix(*view);
      }
      case Op::kIdentity: {
        linalg::Matrix eye(e->rows, e->cols);
        for (std::size_t i = 0; i < e->rows; ++i) eye.at(i, i) = 1.0;
        return eye;
      }
      case Op::kProduct:
        if (multiply_) return multiply_(*operands[0], *operands[1]);
        return local_product(*operands[0], *operands[1]);
      case Op::kSum:
      case Op::kDifference: {
        linalg::Matrix out = *operands[0];
        const double sign = e->op == Op::kSum ? 1.0 : -1.0;
        for (std::size_t i = 0; i < out.values.size(); ++i) out.values[i] += sign * operands[1]->values[i];
        return out;
      }
      case Op::kScale: {
        linalg::Matrix out = *operands[0];
        for (double& v : out.values) v *= e->scalar;
        return out;
      }
      case Op::kTranspose: {
        const linalg::Matrix& in = *operands[0];
        linalg::Matrix out(in.cols, in.rows);
        for (std::size_t i = 0; i < in.rows; ++i)
          for (std::size_t j = 0; j < in.cols; ++j) out.at(j, i) = in.at(i, j);
        return out;
      }
      case Op::kPower: {
        // The products rewrite() would lower it to. They stay alive with the evaluator, since
        // values_ is keyed by their addresses.
        // (A copy, not a reference into lowered_: a nested power grows the vector.)
        const Expr lowered = power_by_squaring(e->operands[0], e->exponent);
        lowered_.push_back(lowered);
        Result<const linalg::Matrix*> raised = value(lowered);
        if (!raised) return raised.status();
        return **raised;
      }
    }
    return internal_error("unknown expression node");
  }

  const std::map<std::string, linalg::MatrixView>& inputs_;
  const MultiplyFn& multiply_;
  std::unordered_map<const Node*, linalg::Matrix> values_;
  std::vector<Expr> lowered_;  // powers as products, for as long as values_ may name their nodes
};

}  // namespace

Result<linalg::MatrixView> input_view(const Expr& input, const std::map<std::string, linalg::MatrixView>& inputs) {
  const auto found = inputs.find(input->name);
  if (found == inputs.end()) return not_found(fmt::format("no matrix was given for input {}", input->name));
  const linalg::MatrixView view = found->second;
  if (view.rows != input->rows || view.cols != input->cols) {
    return invalid_argument(fmt::format("input {} is {}x{} but the expression was built for {}x{}", input->name,
                                        view.rows, view.cols, input->rows, input->cols));
  }
  return view;
}

Result<linalg::Matrix> evaluate(const Expr& e, const std::map<std::string, linalg::MatrixView>& inputs,
                                const MultiplyFn& multiply) {
  Evaluator evaluator(inputs, multiply);
  Result<const linalg::Matrix*> value = evaluator.value(e);
  if (!value) return value.status();
  return **value;
}

}  // namespace tessera::balance::expr
