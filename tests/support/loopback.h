// Raw TCP clients for tests that control the bytes on the wire (serve's HTTP).
#pragma once

namespace ef::test {

// A blocking TCP connection to 127.0.0.1:port with TCP_NODELAY and 10 s send and
// receive timeouts (a test that would hang fails instead). -1 if it fails.
int ConnectLoopback(int port);

}  // namespace ef::test
