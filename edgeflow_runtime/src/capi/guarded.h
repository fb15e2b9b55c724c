// The one error convention of the C ABI (include/edgeflow/c_api.h): a function that can fail returns 0, or -1 (NULL
// for a handle) after storing a message in a thread-local string that ef_last_error() returns. No exception crosses
// the ABI.
#pragma once

#include <exception>
#include <string>

namespace edgeflow::capi {

inline std::string& last_error() {
  thread_local std::string message;
  return message;
}

// Runs f; an exception becomes -1 and its message.
template <class F>
int guarded(F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    last_error() = e.what();
  } catch (...) {
    last_error() = "unknown error";
  }
  return -1;
}

}  // namespace edgeflow::capi
