#include "errors.hpp"

#include <string>

namespace tessera::python {

namespace py = pybind11;

void raise_status(const Status& status) {
  const py::object from_status = py::module_::import("tessera.errors").attr("error_for_status");
  const py::object error = from_status(std::string(status_code_name(status.code())), status.message());
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw py::error_already_set();
}

}  // namespace tessera::python
