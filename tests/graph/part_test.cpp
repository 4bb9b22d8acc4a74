#include "tessera/graph/part.hpp"
