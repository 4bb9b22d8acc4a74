// The performance model, whole: what a node computes and transfers per second, and the finish
// time of every node for a given plan, predicted without running it. One include for callers
// that use all of it; each part has its own header:
//   cluster_model.hpp  the values: speed curves, links, CPU and host of each node, the cluster
//   host.hpp           how nodes on the coordinator's host share its cores
//   replay.hpp         forecasts: the static plan's fluid replay, the dynamic policy's pull replay
//   model_policy.hpp   the `model` policy, rows sized by forecast finish times
// Pure functions and values; thread-compatible.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tessera/balance/model/cluster_model.hpp"
#include "tessera/balance/model/host_sharing.hpp"
#include "tessera/balance/model/model_policy.hpp"
#include "tessera/balance/model/replay.hpp"
