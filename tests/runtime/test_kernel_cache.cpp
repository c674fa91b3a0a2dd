// Tests of the on-disk kernel cache: round trips, keys that must not match, damaged entries, the
// environment switches, concurrent writers in two processes, and an unwritable directory. Every test
// works in its own temporary directory, never in the user's cache.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_cache.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system temporary directory, removed with its contents at scope exit.
class TemporaryDirectory {
 public:
  TemporaryDirectory() {
    std::string pattern = (fs::temp_directory_path() / "kiln-cache-test-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TemporaryDirectory() {
    std::error_code ignored;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ignored);
    fs::remove_all(path_, ignored);
  }
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  std::string path() const { return path_.string(); }
  std::string sub(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// Sets an environment variable for one scope and restores the previous state.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old;
    if (value) setenv(name, value, 1); else unsetenv(name);
  }
  ~ScopedEnv() {
    if (saved_) setenv(name_, saved_->c_str(), 1); else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

CacheKey make_key(uint64_t hash, std::string text, std::string target = "x86_64-unknown-linux-gnu/znver4/+avx2") {
  CacheKey key;
  key.ast_hash = hash;
  key.ast_text = std::move(text);
  key.target = std::move(target);
  return key;
}

// An "object" with every byte value, NULs included.
std::string binary_object(size_t size, unsigned seed) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 131 + seed * 7) & 0xff);
  return bytes;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::string> files_in(const std::string& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory)) names.push_back(entry.path().filename().string());
  return names;
}

TEST_SUITE("runtime") {
  TEST_CASE("kernel cache: store then load returns the same object") {
    TemporaryDirectory dir;
    KernelCache cache(dir.sub("nested/kiln"));  // missing parents are created on the first store
    CHECK(cache.enabled());
    CacheKey key = make_key(0x1234, "SINK(STORE(...))");
    CHECK_FALSE(cache.load(key).has_value());
    std::string object = binary_object(10000, 1);
    cache.store(key, object);
    std::optional<std::string> loaded = cache.load(key);
    REQUIRE(loaded.has_value());
    CHECK(*loaded == object);

    // The empty object round-trips too.
    CacheKey empty_key = make_key(99, "empty");
    cache.store(empty_key, "");
    REQUIRE(cache.load(empty_key).has_value());
    CHECK(cache.load(empty_key)->empty());

    // A second cache object on the same directory (a later process) finds the entry.
    KernelCache later(dir.sub("nested/kiln"));
    CHECK(later.load(key) == object);

    KernelCacheStats stats = cache.stats();
    CHECK(stats.hits == 3);
    CHECK(stats.misses == 1);
    CHECK(stats.rejected == 0);
    CHECK(stats.stores == 2);
    CHECK(stats.store_failures == 0);
    // The directory is private: cached objects are loaded as code.
    struct stat info;
    REQUIRE(::stat(dir.sub("nested/kiln").c_str(), &info) == 0);
    CHECK((info.st_mode & 0777) == 0700);
  }

  TEST_CASE("kernel cache: other targets, versions and hashes do not match") {
    TemporaryDirectory dir;
    KernelCache cache(dir.path());
    CacheKey key = make_key(7, "kernel A");
    cache.store(key, "object A");

    CacheKey other_target = key;
    other_target.target = "x86_64-unknown-linux-gnu/znver3/+avx2";
    CHECK_FALSE(cache.load(other_target).has_value());
    CacheKey other_version = key;
    other_version.version = "0.0.0-other";
    CHECK_FALSE(cache.load(other_version).has_value());
    CHECK(cache.entry_path(other_version) != cache.entry_path(key));
    CacheKey other_hash = key;
    other_hash.ast_hash = 8;
    CHECK_FALSE(cache.load(other_hash).has_value());
    CHECK(key.version == KILN_VERSION_STRING);
    CHECK(cache.load(key) == std::string("object A"));
  }

  TEST_CASE("kernel cache: same hash with a different AST text is a miss") {
    TemporaryDirectory dir;
    KernelCache cache(dir.path());
    CacheKey first = make_key(42, "kernel one");
    CacheKey colliding = make_key(42, "kernel two");
    REQUIRE(cache.entry_path(first) == cache.entry_path(colliding));
    cache.store(first, "object one");
    CHECK_FALSE(cache.load(colliding).has_value());
    CHECK(cache.stats().rejected == 1);
    // The colliding kernel is compiled and stored; now it wins the slot and the first one misses.
    cache.store(colliding, "object two");
    CHECK(cache.load(colliding) == std::string("object two"));
    CHECK_FALSE(cache.load(first).has_value());
  }

  TEST_CASE("kernel cache: damaged entries are misses and get replaced") {
    TemporaryDirectory dir;
    KernelCache cache(dir.path());
    CacheKey key = make_key(5, "kernel five");
    std::string object = binary_object(4096, 5);
    cache.store(key, object);
    std::string path = cache.entry_path(key);
    std::string good = read_bytes(path);
    REQUIRE(good.size() > 64 + object.size());

    std::vector<std::pair<const char*, std::string>> damaged;
    std::string flipped = good;
    flipped[good.size() - 100] ^= 0x40;  // inside the object bytes
    damaged.emplace_back("a flipped object byte", flipped);
    damaged.emplace_back("a truncated file", good.substr(0, good.size() - 1));
    damaged.emplace_back("only the header", good.substr(0, 64));
    damaged.emplace_back("a short header", good.substr(0, 10));
    damaged.emplace_back("an empty file", "");
    damaged.emplace_back("an appended byte", good + "x");
    std::string huge_length = good;
    for (int i = 48; i < 56; ++i) huge_length[static_cast<size_t>(i)] = '\xff';  // object_length = 2^64-1
    damaged.emplace_back("a huge length field", huge_length);
    std::string bad_magic = good;
    bad_magic[0] = 'X';
    damaged.emplace_back("a wrong magic", bad_magic);
    damaged.emplace_back("text garbage", std::string(5000, 'z'));

    for (const auto& [what, bytes] : damaged) {
      CAPTURE(what);
      write_bytes(path, bytes);
      CHECK_FALSE(cache.load(key).has_value());
      cache.store(key, object);  // what a compiler does after the miss
      CHECK(cache.load(key) == object);
    }
    CHECK(cache.stats().rejected == damaged.size());

    // A directory where the entry should be is a miss as well, not a crash.
    fs::remove(path);
    fs::create_directory(path);
    CHECK_FALSE(cache.load(key).has_value());
  }

  TEST_CASE("kernel cache: environment selects the directory; KILN_CACHE=0 turns it off") {
    TemporaryDirectory dir;
    {
      ScopedEnv cache_dir("KILN_CACHE_DIR", dir.sub("explicit").c_str());
      ScopedEnv switch_on("KILN_CACHE", nullptr);
      CHECK(KernelCache::directory_from_environment() == dir.sub("explicit"));
      ScopedEnv switch_off("KILN_CACHE", "0");
      CHECK(KernelCache::directory_from_environment().empty());
    }
    {
      ScopedEnv cache_dir("KILN_CACHE_DIR", nullptr);
      ScopedEnv switch_on("KILN_CACHE", "1");
      ScopedEnv xdg("XDG_CACHE_HOME", dir.sub("xdg").c_str());
      CHECK(KernelCache::directory_from_environment() == dir.sub("xdg") + "/kiln");
      ScopedEnv relative_xdg("XDG_CACHE_HOME", "relative/path");  // invalid per the XDG spec
      ScopedEnv home("HOME", dir.sub("home").c_str());
      CHECK(KernelCache::directory_from_environment() == dir.sub("home") + "/.cache/kiln");
      ScopedEnv no_home("HOME", nullptr);
      CHECK(KernelCache::directory_from_environment().empty());
    }

    KernelCache disabled("");
    CHECK_FALSE(disabled.enabled());
    CacheKey key = make_key(1, "k");
    disabled.store(key, "object");
    CHECK_FALSE(disabled.load(key).has_value());
    CHECK(disabled.stats().stores == 0);
  }

  TEST_CASE("kernel cache: the process-wide instance follows the environment") {
    TemporaryDirectory dir;
    ScopedEnv switch_on("KILN_CACHE", nullptr);
    ScopedEnv cache_dir("KILN_CACHE_DIR", dir.path().c_str());
    KernelCache& cache = KernelCache::instance();
    CHECK(&cache == &KernelCache::instance());
    CHECK(cache.directory() == dir.path());
    // Nothing is stored through it: the directory disappears with this test.
  }

  TEST_CASE("kernel cache: two processes storing the same key leave a valid entry") {
    TemporaryDirectory dir;
    CacheKey key = make_key(0xfeed, "shared kernel");
    // Large objects so that the writes take long enough to overlap.
    const std::string objects[2] = {binary_object(4 << 20, 11), binary_object(4 << 20, 12)};
    constexpr int kRounds = 20;
    pid_t children[2];
    for (int c = 0; c < 2; ++c) {
      children[c] = ::fork();
      REQUIRE(children[c] >= 0);
      if (children[c] == 0) {
        KernelCache cache(dir.path());
        for (int round = 0; round < kRounds; ++round) cache.store(key, objects[c]);
        ::_exit(cache.stats().stores == kRounds ? 0 : 1);
      }
    }
    // Meanwhile the parent reads: once the entry exists, every read must be one whole object.
    KernelCache reader(dir.path());
    int hits = 0;
    int wrong = 0;
    int statuses[2] = {-1, -1};
    bool done[2] = {false, false};
    while (!done[0] || !done[1]) {
      if (std::optional<std::string> object = reader.load(key)) {
        ++hits;
        wrong += *object != objects[0] && *object != objects[1];
      } else if (hits > 0) {
        ++wrong;  // the entry vanished or was seen half written
      }
      for (int c = 0; c < 2; ++c) {
        if (!done[c] && ::waitpid(children[c], &statuses[c], WNOHANG) == children[c]) done[c] = true;
      }
    }
    for (int status : statuses) {
      CHECK(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 0);
    }
    CHECK(wrong == 0);
    CHECK(reader.stats().rejected == 0);
    std::optional<std::string> final_object = reader.load(key);
    REQUIRE(final_object.has_value());
    CHECK((*final_object == objects[0] || *final_object == objects[1]));
    // No temporary file is left behind.
    CHECK(files_in(dir.path()) == std::vector<std::string>{fs::path(reader.entry_path(key)).filename().string()});
  }

  TEST_CASE("kernel cache: an unwritable directory is reported and ignored") {
    TemporaryDirectory dir;
    CacheKey key = make_key(9, "kernel nine");
    // A regular file where a parent directory should be defeats even root.
    write_bytes(dir.sub("file"), "not a directory");
    KernelCache blocked(dir.sub("file/kiln"));
    CHECK(blocked.enabled());
    blocked.store(key, "object");
    blocked.store(key, "object");  // warned once; the second store does not retry
    CHECK_FALSE(blocked.load(key).has_value());
    CHECK(blocked.stats().stores == 0);
    CHECK(blocked.stats().store_failures == 1);

    // A read-only directory (only meaningful when not root: root writes anyway).
    if (::geteuid() != 0) {
      std::string read_only = dir.sub("read-only");
      fs::create_directory(read_only);
      fs::permissions(read_only, fs::perms::owner_read | fs::perms::owner_exec);
      KernelCache cache(read_only);
      cache.store(key, "object");
      CHECK_FALSE(cache.load(key).has_value());
      CHECK(cache.stats().store_failures == 1);
      fs::permissions(read_only, fs::perms::owner_all);
    }
  }
}

}  // namespace
}  // namespace kiln
