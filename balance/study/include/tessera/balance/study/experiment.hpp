// Forwarding header: the multiply study lives in multiply_study.hpp, what every study shares in
// study_common.hpp. Kept so that callers outside the study library (the CLI's `tessera experiment`
// and `tessera graph --trace-png`) compile unchanged.
#pragma once

#include "tessera/balance/study/multiply_study.hpp"
#include "tessera/balance/study/study_common.hpp"
