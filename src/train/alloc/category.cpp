// Names and map initials of the tensor categories (sluice/train/category.hpp).
#include "sluice/train/category.hpp"

namespace sluice {

std::string_view to_string(TensorCategory category) {
  switch (category) {
    case TensorCategory::kWeights: return "weights";
    case TensorCategory::kGradients: return "gradients";
    case TensorCategory::kOptimizerState: return "optimizer state";
    case TensorCategory::kActivations: return "activations";
    case TensorCategory::kWorkspace: return "workspace";
    case TensorCategory::kInputHost: return "input (host)";
    case TensorCategory::kInputPinned: return "input (pinned)";
  }
  return "unknown";
}

char category_initial(TensorCategory category) {
  switch (category) {
    case TensorCategory::kWeights: return 'W';
    case TensorCategory::kGradients: return 'G';
    case TensorCategory::kOptimizerState: return 'O';
    case TensorCategory::kActivations: return 'A';
    case TensorCategory::kWorkspace: return 'w';
    case TensorCategory::kInputHost: return 'I';
    case TensorCategory::kInputPinned: return 'P';
  }
  return '?';
}

}  // namespace sluice
