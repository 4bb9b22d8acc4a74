// Summary statistics over repeated measurements (probe windows, benchmark runs, study runs).
//
// Pure functions over copies; thread-safe.
#pragma once

#include <vector>

namespace tessera {

// The middle value, or the mean of the two middle values for an even count; NaN for no values
// (a summary of nothing is "no figure", not 0). NaNs among the values give an unspecified result.
double median(std::vector<double> values);

// The mean of the values but the smallest (for rates, where outside load only ever slows a
// measurement); the single value for one, NaN for none.
double mean_without_slowest(std::vector<double> values);

}  // namespace tessera
