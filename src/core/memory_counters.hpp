#pragma once
// Counting of buffer allocations (memory_counters() in buffer.hpp), shared by the host and
// device halves of the core, and the allocation-failure hook of the out-of-memory tests.
#include <cstddef>
#include <cstdint>

namespace cubekit::detail {

enum class MemoryKind { Host, Device, Pinned };
void count_allocation(MemoryKind kind, std::size_t bytes);

/// Test hook (issue 18, item 6): the `nth` device or pinned allocation from now (0 = the next
/// one) fails as if the device were out of memory; a negative value disarms it. One failure per
/// arming. CUBEKIT_FAIL_DEVICE_ALLOCATION=N in the environment arms it at start-up (the CLI's
/// tests). Every device allocation of the library goes through DeviceBuffer (CUB's temporary
/// storage included) and every pinned one that can fail a call through PinnedBuffer, so the
/// tests reach each allocation site in turn. (The per-thread read-back buffer and the staged-copy
/// ring fall back to pageable copies when pinned memory is refused; they are not hooked.)
void fail_device_allocation(std::int64_t nth);
/// Called by the allocators: true when this allocation must fail (consumes the armed failure).
bool device_allocation_must_fail();

}  // namespace cubekit::detail
