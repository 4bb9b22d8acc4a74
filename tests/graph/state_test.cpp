#include "tessera/graph/state.hpp"
