#include "tessera/partition/digraph.hpp"
