// KernelCache: entry naming, the entry file format and its checks, and the atomic write protocol
// described in kernel_cache.h.
#include "codegen/kernel_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/SHA256.h>
#include <llvm/Support/xxhash.h>

#include "support/debug.h"
#include "support/error.h"

namespace kiln {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'K', 'O', 'B', 'J'};
// Bump when the layout below changes; old entries then read as misses and get replaced.
constexpr uint32_t kFormat = 1;
// A larger file is not one of ours (kernel objects are kilobytes); refuse it rather than read it.
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 30;

struct EntryHeader {
  char magic[8];
  uint32_t format;
  uint32_t reserved;
  uint64_t ast_hash;
  uint64_t text_length;
  uint64_t target_length;
  uint64_t version_length;
  uint64_t object_length;
  uint64_t checksum;
};
static_assert(std::is_trivially_copyable_v<EntryHeader> && sizeof(EntryHeader) == 64,
              "the header is written and read as raw bytes");
constexpr size_t kChecksumOffset = offsetof(EntryHeader, checksum);

uint64_t checksum_of(const std::string& file_bytes) {
  return llvm::xxh3_64bits(llvm::StringRef(file_bytes.data(), file_bytes.size()));
}

std::string errno_text(int error) { return std::strerror(error); }

// Creates `path` and its missing parents, private to the user. Returns 0 or an errno value.
int make_directories(const std::string& path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    std::string prefix = path.substr(0, slash);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) return errno;
    if (slash == std::string::npos) break;
  }
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return errno;
  return S_ISDIR(info.st_mode) ? 0 : ENOTDIR;
}

bool write_all(int fd, const std::string& bytes) {
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

// Reads the whole file, or nothing when it cannot be opened or is implausibly large.
std::optional<std::string> read_file(const std::string& path, bool& exists) {
  exists = false;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  exists = true;
  std::optional<std::string> result;
  struct stat info;
  if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode) &&
      static_cast<uint64_t>(info.st_size) <= kMaxEntryBytes) {
    std::string bytes(static_cast<size_t>(info.st_size), '\0');
    size_t done = 0;
    bool ok = true;
    while (done < bytes.size()) {
      ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ok = false;
        break;
      }
      done += static_cast<size_t>(n);
    }
    if (ok) result = std::move(bytes);
  }
  ::close(fd);
  return result;
}

// Checks an entry against the key; returns the object when every check passes.
std::optional<std::string> parse_entry(const std::string& bytes, const CacheKey& key) {
  if (bytes.size() < sizeof(EntryHeader)) return std::nullopt;
  EntryHeader header;
  std::memcpy(&header, bytes.data(), sizeof header);
  if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0 || header.format != kFormat)
    return std::nullopt;
  // Each length is bounded by the file size first, so that their sum cannot overflow.
  uint64_t body = bytes.size() - sizeof(EntryHeader);
  for (uint64_t length : {header.text_length, header.target_length, header.version_length,
                          header.object_length}) {
    if (length > body) return std::nullopt;
  }
  if (header.text_length + header.target_length + header.version_length + header.object_length != body)
    return std::nullopt;
  std::string zeroed = bytes;
  std::memset(zeroed.data() + kChecksumOffset, 0, sizeof header.checksum);
  if (checksum_of(zeroed) != header.checksum) return std::nullopt;

  size_t offset = sizeof(EntryHeader);
  auto field = [&](uint64_t length) {
    std::string_view view(bytes.data() + offset, static_cast<size_t>(length));
    offset += static_cast<size_t>(length);
    return view;
  };
  std::string_view text = field(header.text_length);
  std::string_view target = field(header.target_length);
  std::string_view version = field(header.version_length);
  std::string_view object = field(header.object_length);
  // A different text under the same hash is a collision; a different target or version could only
  // come from a collision of the file name. Either way the object is not this key's.
  if (header.ast_hash != key.ast_hash || text != key.ast_text || target != key.target ||
      version != key.version)
    return std::nullopt;
  return std::string(object);
}

std::string encode_entry(const CacheKey& key, const std::string& object) {
  EntryHeader header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.format = kFormat;
  header.ast_hash = key.ast_hash;
  header.text_length = key.ast_text.size();
  header.target_length = key.target.size();
  header.version_length = key.version.size();
  header.object_length = object.size();
  std::string bytes(reinterpret_cast<const char*>(&header), sizeof header);
  bytes.reserve(sizeof header + key.ast_text.size() + key.target.size() + key.version.size() +
                object.size());
  bytes += key.ast_text;
  bytes += key.target;
  bytes += key.version;
  bytes += object;
  uint64_t checksum = checksum_of(bytes);  // computed with the checksum field still zero
  std::memcpy(bytes.data() + kChecksumOffset, &checksum, sizeof checksum);
  return bytes;
}

}  // namespace

std::string KernelCache::directory_from_environment() {
  if (env_integer("KILN_CACHE", 1) == 0) return {};
  auto nonempty = [](const char* name) -> const char* {
    const char* value = std::getenv(name);
    return value != nullptr && *value != '\0' ? value : nullptr;
  };
  if (const char* dir = nonempty("KILN_CACHE_DIR")) return dir;
  // The XDG spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
  if (const char* xdg = nonempty("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/')
    return str_cat(xdg, "/kiln");
  if (const char* home = nonempty("HOME")) return str_cat(home, "/.cache/kiln");
  return {};
}

KernelCache& KernelCache::instance() {
  static KernelCache cache(directory_from_environment(), /*report_at_exit=*/true);
  return cache;
}

KernelCache::KernelCache(std::string directory) : KernelCache(std::move(directory), false) {}

KernelCache::KernelCache(std::string directory, bool report_at_exit)
    : directory_(std::move(directory)), report_at_exit_(report_at_exit) {
  // Trailing slashes would only make the entry paths uglier.
  while (directory_.size() > 1 && directory_.back() == '/') directory_.pop_back();
  if (report_at_exit_ && debug_level() >= 1)
    debug_print(directory_.empty() ? std::string("kernel cache: off")
                                   : str_cat("kernel cache: ", directory_));
}

KernelCache::~KernelCache() {
  if (!report_at_exit_ || debug_level() < 1) return;
  KernelCacheStats s = stats();
  if (s.hits + s.misses + s.stores + s.store_failures == 0) return;
  // Plain fprintf: this runs during static destruction, when debug_print's own statics may be gone.
  std::fprintf(stderr,
               "kiln: kernel cache %s: %llu hits, %llu misses (%llu rejected entries), %llu stores, "
               "%llu failed stores\n",
               directory_.c_str(), static_cast<unsigned long long>(s.hits),
               static_cast<unsigned long long>(s.misses), static_cast<unsigned long long>(s.rejected),
               static_cast<unsigned long long>(s.stores),
               static_cast<unsigned long long>(s.store_failures));
}

std::string KernelCache::entry_path(const CacheKey& key) const {
  // A strong hash, so that distinct (AST hash, target, version) triples never share a file in
  // practice; lengths are hashed too, so that field boundaries cannot be shifted.
  llvm::SHA256 sha;
  auto add_u64 = [&](uint64_t value) {
    uint8_t bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(value >> (8 * i));
    sha.update(llvm::ArrayRef<uint8_t>(bytes, 8));
  };
  auto add_string = [&](const std::string& text) {
    add_u64(text.size());
    sha.update(llvm::StringRef(text));
  };
  sha.update(llvm::StringRef("kiln kernel cache entry name"));
  add_u64(key.ast_hash);
  add_string(key.target);
  add_string(key.version);
  std::array<uint8_t, 32> digest = sha.final();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name;
  for (size_t i = 0; i < 16; ++i) {
    name += kHex[digest[i] >> 4];
    name += kHex[digest[i] & 15];
  }
  return str_cat(directory_, "/", name, ".kobj");
}

std::optional<std::string> KernelCache::load(const CacheKey& key) {
  if (!enabled()) return std::nullopt;
  std::string path = entry_path(key);
  bool exists = false;
  std::optional<std::string> bytes = read_file(path, exists);
  std::optional<std::string> object = bytes ? parse_entry(*bytes, key) : std::nullopt;
  if (object) {
    hits_.fetch_add(1, std::memory_order_relaxed);
    return object;
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  if (exists) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    if (debug_level() >= 1) debug_print(str_cat("kernel cache: ignoring invalid entry ", path));
  }
  return std::nullopt;
}

void KernelCache::report_store_failure(const std::string& what) {
  store_failures_.fetch_add(1, std::memory_order_relaxed);
  if (!warned_.exchange(true))
    debug_print(str_cat("warning: kernel cache: ", what, "; compiled kernels are not cached"));
}

void KernelCache::store(const CacheKey& key, const std::string& object) {
  if (!enabled() || unwritable_.load(std::memory_order_relaxed)) return;
  if (int error = make_directories(directory_)) {
    unwritable_.store(true, std::memory_order_relaxed);
    report_store_failure(str_cat("cannot create ", directory_, ": ", errno_text(error)));
    return;
  }
  std::string path = entry_path(key);
  // Same directory as the entry, so that rename() is atomic; mkstemp makes the name unique across
  // threads and processes and the file private (0600).
  std::string temporary = str_cat(directory_, "/.tmp-", path.substr(directory_.size() + 1), "-XXXXXX");
  int fd = ::mkstemp(temporary.data());
  if (fd < 0) {
    int error = errno;
    unwritable_.store(true, std::memory_order_relaxed);
    report_store_failure(str_cat("cannot write in ", directory_, ": ", errno_text(error)));
    return;
  }
  bool written = write_all(fd, encode_entry(key, object));
  int write_error = errno;
  // No fsync: after a crash an entry may be short or garbage, and the checksum turns that into a
  // miss; paying a disk flush per compiled kernel would buy nothing more.
  if (::close(fd) != 0 && written) {
    written = false;
    write_error = errno;
  }
  if (!written) {
    ::unlink(temporary.c_str());
    report_store_failure(str_cat("cannot write ", temporary, ": ", errno_text(write_error)));
    return;
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    int error = errno;
    ::unlink(temporary.c_str());
    report_store_failure(str_cat("cannot rename to ", path, ": ", errno_text(error)));
    return;
  }
  stores_.fetch_add(1, std::memory_order_relaxed);
}

KernelCacheStats KernelCache::stats() const {
  KernelCacheStats s;
  s.hits = hits_.load(std::memory_order_relaxed);
  s.misses = misses_.load(std::memory_order_relaxed);
  s.rejected = rejected_.load(std::memory_order_relaxed);
  s.stores = stores_.load(std::memory_order_relaxed);
  s.store_failures = store_failures_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace kiln
