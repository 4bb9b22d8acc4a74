// Status -> Python exception, in one place: the class comes from tessera.errors.error_for_status (the
// table of Status codes to classes lives there, beside the classes and their docstrings), the
// message is the C++ Status message unchanged. REQUIRES: the GIL is held.
#pragma once

#include <pybind11/pybind11.h>

#include "tessera/core/status.hpp"

namespace tessera::python {

// Sets the Python error for `status` (not OK) and throws pybind11::error_already_set.
[[noreturn]] void raise_status(const Status& status);

template <typename T>
T value_or_raise(Result<T>&& result) {
  if (!result) raise_status(result.status());
  return std::move(result).value();
}

inline void ok_or_raise(const Status& status) {
  if (!status) raise_status(status);
}

}  // namespace tessera::python
