// A network namespace joined to the root namespace by a veth pair, for end-to-end tests that cut
// a node's network and restore it. The root side is HOST_ADDRESS, the namespace side
// NODE_ADDRESS (a /24 of 10.213.0.0/16 chosen per process); loopback is up inside, so an agent
// there can reach its own engine. Cut() takes the namespace side's link down: packets are lost
// both ways and the node's own sends fail, the way an unplugged cable does; Restore() brings it
// back. The destructor deletes the namespace (and so the pair), also after a failed assertion;
// Create() first deletes namespaces of earlier test processes that were killed before theirs.
//
// Needs CAP_NET_ADMIN (root): Create() says why not otherwise, and tests skip.
//
// Thread-safety: one per test, used from the test's thread.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace servesweep::testing {

class NetworkNamespace {
 public:
  NetworkNamespace() = default;
  ~NetworkNamespace();
  NetworkNamespace(const NetworkNamespace&) = delete;
  NetworkNamespace& operator=(const NetworkNamespace&) = delete;

  // Creates the namespace, the pair and the addresses. On failure nothing is left behind and
  // the status says which command failed and what it printed.
  Status Create(const std::string& tag);
  Status Cut();
  Status Restore();

  const std::string& name() const { return name_; }
  const std::string& host_address() const { return host_address_; }  // root namespace side
  const std::string& node_address() const { return node_address_; }  // inside the namespace
  // argv prefix that runs a program inside the namespace (ip netns exec execs it directly).
  std::vector<std::string> ExecPrefix() const { return {"ip", "netns", "exec", name_}; }

 private:
  void Destroy();
  std::string name_, host_link_, node_link_, host_address_, node_address_;
  bool created_ = false;
};

}  // namespace servesweep::testing
