#include "tessera/graph/wire.hpp"
