#include "tessera/graph/reference.hpp"
