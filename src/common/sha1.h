// SHA-1 (FIPS 180-4) of a byte string, as 40 lowercase hex digits: the name Redis
// gives a script (EVALSHA). Written here rather than linking OpenSSL's libcrypto
// into the client for one hash of one constant string; checked against Redis's
// own SCRIPT LOAD (tests/integration/served_test.cc) and FIPS 180's examples.
// Pure and thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace ef {

std::string Sha1Hex(std::string_view data);

}  // namespace ef
