// Bindings of the edges family: being written (this session); the module links without them for now.
#include "bindings.hpp"

namespace cubekit::python {

void bind_edges(py::module_&) {}

}  // namespace cubekit::python
