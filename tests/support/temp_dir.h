// TempDir: a fresh directory under the system's temporary directory,
// removed with everything in it when the object goes. Header-only, for test
// binaries that do not link the test support library.

#ifndef BIGSET_TESTS_SUPPORT_TEMP_DIR_H_
#define BIGSET_TESTS_SUPPORT_TEMP_DIR_H_

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <system_error>

namespace bigset::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "bigset-test-XXXXXX")
            .string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace bigset::testing

#endif  // BIGSET_TESTS_SUPPORT_TEMP_DIR_H_
