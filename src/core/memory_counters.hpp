#pragma once
// Counting of buffer allocations (memory_counters() in buffer.hpp), shared by the host and
// device halves of the core.
#include <cstddef>

namespace cubekit::detail {

enum class MemoryKind { Host, Device, Pinned };
void count_allocation(MemoryKind kind, std::size_t bytes);

}  // namespace cubekit::detail
