// The IPv4 TCP sockets of this machine as /proc/net/tcp lists them, for tests
// that look at connection states (TIME_WAIT) or unread bytes from outside.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ef::test {

struct ProcTcpSocket {
  int local_port = 0;
  int remote_port = 0;
  std::string state;     // hex, as the kernel prints it: "01" ESTABLISHED, "06" TIME_WAIT
  int64_t rx_queue = 0;  // bytes received and not read yet
};

inline std::vector<ProcTcpSocket> ProcNetTcp() {
  std::vector<ProcTcpSocket> out;
  std::ifstream f("/proc/net/tcp");
  std::string line;
  std::getline(f, line);  // the header
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string sl, local, remote, state, queues;
    in >> sl >> local >> remote >> state >> queues;
    ProcTcpSocket s;
    s.local_port = std::stoi(local.substr(local.find(':') + 1), nullptr, 16);
    s.remote_port = std::stoi(remote.substr(remote.find(':') + 1), nullptr, 16);
    s.state = state;
    s.rx_queue = std::stoll(queues.substr(queues.find(':') + 1), nullptr, 16);
    out.push_back(s);
  }
  return out;
}

}  // namespace ef::test
