// libcurl's process-wide initialisation, once: curl_global_init is not thread-safe in every
// build, and the load generator, the answer client and the agent's HTTP GET may first use libcurl
// on different threads at once. Every libcurl user calls InitCurlOnce() before its first handle.
//
// Thread-safety: safe from any thread (std::call_once).
#pragma once

namespace servesweep {

void InitCurlOnce();

}  // namespace servesweep
