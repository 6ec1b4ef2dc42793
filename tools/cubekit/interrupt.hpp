#pragma once
// SIGINT, SIGTERM and SIGHUP in the CLI. A signal sets the cancellation flag every Context the CLI
// makes watches (make_context), so the work stops at its next check and the command's own failure
// path removes what it wrote; main then exits 130 with one line. Work that does not reach a check
// within the grace period (a long read, a kernel) is stopped at once: the temporaries of the writes
// in progress and the outputs of the run so far (OutputList) are removed, one line is printed and
// the process exits 130. Either way an interrupted run leaves no output and no temporary file.
#include <atomic>
#include <string>

namespace cubekit::cli {

/// Blocks the signals in the calling thread (main, before any other thread starts, so every thread
/// inherits the mask) and starts the thread that waits for them.
void install_interrupt_handling();

/// The flag a signal sets: ContextOptions::cancel of the CLI's contexts.
const std::atomic<bool>* interrupt_flag();

/// True once a signal arrived.
bool interrupted();

/// "SIGINT", "SIGTERM" or "SIGHUP": the signal that arrived ("" before one did).
std::string interrupt_name();

/// The outputs of the run in progress, removed when the grace period ends (OutputList registers
/// each output it lists and forgets them when it is destroyed: the command has finished).
void register_run_output(const std::string& path);
void forget_run_output(const std::string& path);

}  // namespace cubekit::cli
