// A scratch directory removed (recursively) when the object goes away.
#pragma once

#include <string>

namespace ef::test {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  void Write(const std::string& name, const std::string& content) const;
  std::string Read(const std::string& name) const;

 private:
  std::string path_;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();

}  // namespace ef::test
