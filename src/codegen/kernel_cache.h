// The on-disk cache of compiled kernel object files, so that a kernel already compiled (in this or an
// earlier process) is not compiled again. Entries are keyed by the kernel AST, the target and the kiln
// version; a damaged, truncated or colliding entry reads as a miss, never as wrong code.
//
// Location: $KILN_CACHE_DIR if set, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln; KILN_CACHE=0
// turns the cache off. Cached objects are loaded as code, so the directory is created private (0700);
// anyone who can write to it can run code in the processes that use it.
//
// Entry file (host byte order; an entry is only ever read on the machine class that wrote it, since
// the target id is part of the key):
//   header: magic "KILNKOBJ", u32 format, u32 zero, u64 ast_hash, u64 lengths of ast text, target id,
//           version and object, u64 checksum (xxh3 of the whole file with the checksum field zeroed)
//   body:   ast text, target id, version, object bytes
// Writers write a private temporary file in the same directory and rename() it over the entry, so a
// reader sees either the old file or the new one, whole; concurrent writers of one key both succeed
// and the last rename wins.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "kiln/version.h"

namespace kiln {

struct CacheKey {
  // Hash of the kernel AST, computed by the caller; picks the file.
  uint64_t ast_hash = 0;
  // The full canonical text of the kernel AST; stored in the entry and compared on load, so that two
  // ASTs with the same hash never share an object.
  std::string ast_text;
  // What the object was compiled for: triple, CPU name and feature string.
  std::string target;
  // The kiln that compiled it; objects of other versions are never used.
  std::string version = KILN_VERSION_STRING;
};

struct KernelCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;    // includes the rejected entries below
  uint64_t rejected = 0;  // entries found but corrupt, truncated, or for a different AST text
  uint64_t stores = 0;
  uint64_t store_failures = 0;
};

class KernelCache {
 public:
  // The process-wide cache, configured from the environment on first use (directory_from_environment).
  // With KILN_DEBUG >= 1 it prints its counters when the process exits.
  static KernelCache& instance();

  // The directory the environment asks for, or "" when caching is off (KILN_CACHE=0) or no location
  // can be found (no KILN_CACHE_DIR, XDG_CACHE_HOME or HOME).
  static std::string directory_from_environment();

  // A cache in `directory` (created on the first store); "" gives a disabled cache.
  explicit KernelCache(std::string directory);
  ~KernelCache();
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  bool enabled() const { return !directory_.empty(); }
  const std::string& directory() const { return directory_; }

  // The object stored under `key`, or nothing: disabled, no entry, or an entry that fails any check
  // (a later store() replaces it). Never throws for a bad entry.
  std::optional<std::string> load(const CacheKey& key);

  // Writes `object` as the entry for `key`, replacing any existing one. Best effort: failures (an
  // unwritable directory, a full disk) are counted, reported once on stderr, and otherwise ignored.
  void store(const CacheKey& key, const std::string& object);

  // The path of the entry file for `key` (whether or not it exists). For tests and tools.
  std::string entry_path(const CacheKey& key) const;

  KernelCacheStats stats() const;

 private:
  KernelCache(std::string directory, bool report_at_exit);
  void report_store_failure(const std::string& what);

  std::string directory_;
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> stores_{0};
  std::atomic<uint64_t> store_failures_{0};
  std::atomic<bool> warned_{false};
  // Set after a failure to create the directory, so that later stores do not retry on every kernel.
  std::atomic<bool> unwritable_{false};
  // Only the process-wide instance prints its counters at exit (KILN_DEBUG >= 1).
  const bool report_at_exit_;
};

}  // namespace kiln
