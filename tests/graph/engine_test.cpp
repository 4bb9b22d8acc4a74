#include "tessera/graph/engine.hpp"
