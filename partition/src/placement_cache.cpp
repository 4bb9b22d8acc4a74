#include "tessera/partition/placement_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <system_error>

#include <fmt/format.h>

// Header-only use of libxxhash-dev: the functions are compiled in here, so the coordinator gains
// no shared-library dependency (scripts/check-packages.sh keeps its runtime list).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "tessera/partition/row_partition.hpp"

namespace tessera::partition {
namespace {

constexpr char kMagic[8] = {'T', 'S', 'P', 'L', 'A', 'C', 'E', '1'};
constexpr uint32_t kVersion = 1;
// magic, version, parts, hash, vertices, edges, method, objective, seed, imbalance, note bytes,
// reserved.
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8 + 8 + 4 + 4 + 8 + 8 + 4 + 4;
constexpr std::size_t kChecksumBytes = 8;
// Bounds on what a file may claim before anything is allocated from it; the vertex count is
// bounded by the graph's.
constexpr uint32_t kMaxParts = 1u << 20;
constexpr uint32_t kMaxNoteBytes = 1u << 16;
constexpr double kWeightTolerance = 1e-9;

class Writer {
 public:
  template <typename T>
  void put(const T& value) {
    const auto* bytes = reinterpret_cast<const char*>(&value);
    data_.insert(data_.end(), bytes, bytes + sizeof(T));
  }
  void put_bytes(const void* bytes, std::size_t size) {
    const auto* begin = static_cast<const char*>(bytes);
    data_.insert(data_.end(), begin, begin + size);
  }
  std::vector<char>& data() { return data_; }

 private:
  std::vector<char> data_;
};

class Reader {
 public:
  Reader(const char* data, std::size_t size) : data_(data), size_(size) {}
  // The caller has checked the size first; an overrun still reads nothing rather than past the end.
  template <typename T>
  T get() {
    T value{};
    if (offset_ + sizeof(T) <= size_) std::memcpy(&value, data_ + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }
  const char* here() const { return data_ + offset_; }
  void skip(std::size_t bytes) { offset_ += bytes; }

 private:
  const char* data_;
  std::size_t size_;
  std::size_t offset_ = 0;
};

bool close_enough(double a, double b) {
  return std::abs(a - b) <= kWeightTolerance * std::max({std::abs(a), std::abs(b), 1e-300});
}

std::string hex(uint64_t value) { return fmt::format("{:016x}", value); }

std::string errno_text(int error) { return std::error_code(error, std::generic_category()).message(); }

}  // namespace

uint64_t graph_content_hash(const graphdata::Graph& graph) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  auto add_value = [&](int64_t value) { XXH3_64bits_update(state, &value, sizeof(value)); };
  auto add_array = [&](const std::vector<int32_t>& values) {
    add_value(static_cast<int64_t>(values.size()));
    if (!values.empty()) XXH3_64bits_update(state, values.data(), values.size() * sizeof(int32_t));
  };
  add_value(graph.vertex_count());
  add_value(graph.edge_count());
  add_array(graph.xadj());
  add_array(graph.adjncy());
  add_array(graph.vertex_weights());
  add_array(graph.edge_weights());
  const uint64_t hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hash;
}

Result<PlacementKey> placement_key(const graphdata::Graph& graph, const PartitionOptions& options) {
  return placement_key(graph_content_hash(graph), graph, options);
}

Result<PlacementKey> placement_key(uint64_t graph_hash, const graphdata::Graph& graph, const PartitionOptions& options) {
  Result<std::vector<double>> weights = normalise_weights(options.target_weights);
  if (!weights) return weights.status().with_context("target weights: ");
  PlacementKey key;
  key.graph_hash = graph_hash;
  key.vertices = graph.vertex_count();
  key.edges = graph.edge_count();
  key.method = options.method;
  key.objective = options.objective;
  key.seed = options.seed;
  key.imbalance = options.imbalance;
  key.target_weights = std::move(*weights);
  return key;
}

bool same_placement(const PlacementKey& a, const PlacementKey& b, std::string* why) {
  std::string reason;
  if (a.graph_hash != b.graph_hash) {
    reason = fmt::format("graph hash {} differs from {}", hex(a.graph_hash), hex(b.graph_hash));
  } else if (a.vertices != b.vertices || a.edges != b.edges) {
    reason = fmt::format("graph size {} vertices, {} edges differs from {} vertices, {} edges", a.vertices, a.edges,
                         b.vertices, b.edges);
  } else if (a.target_weights.size() != b.target_weights.size()) {
    reason = fmt::format("{} parts differ from {} parts", a.target_weights.size(), b.target_weights.size());
  } else if (a.method != b.method) {
    reason = fmt::format("method {} differs from {}", method_name(a.method), method_name(b.method));
  } else if (a.objective != b.objective) {
    reason = fmt::format("objective {} differs from {}", objective_name(a.objective), objective_name(b.objective));
  } else if (a.seed != b.seed) {
    reason = fmt::format("seed {} differs from {}", a.seed, b.seed);
  } else if (!close_enough(a.imbalance, b.imbalance)) {
    reason = fmt::format("imbalance {} differs from {}", a.imbalance, b.imbalance);
  } else {
    for (std::size_t p = 0; p < a.target_weights.size(); ++p) {
      if (!close_enough(a.target_weights[p], b.target_weights[p])) {
        reason = fmt::format("target weight of part {} is {}, not {}", p, a.target_weights[p], b.target_weights[p]);
        break;
      }
    }
  }
  if (why != nullptr) *why = reason;
  return reason.empty();
}

std::string placement_file_name(const PlacementKey& key) {
  Writer rest;
  rest.put(key.vertices);
  rest.put(key.edges);
  rest.put(static_cast<uint32_t>(key.method));
  rest.put(static_cast<uint32_t>(key.objective));
  rest.put(key.seed);
  rest.put(static_cast<int64_t>(std::llround(key.imbalance * 1e6)));
  rest.put(static_cast<uint64_t>(key.target_weights.size()));
  for (double w : key.target_weights) rest.put(static_cast<int64_t>(std::llround(w * 1e6)));
  const uint64_t digest = XXH3_64bits(rest.data().data(), rest.data().size());
  return fmt::format("placement-{}-{}.tpc", hex(key.graph_hash), hex(digest));
}

Status store_placement(const std::filesystem::path& dir, const PlacementKey& key, const Partition& partition) {
  const std::size_t parts = key.target_weights.size();
  if (parts == 0 || parts > kMaxParts) {
    return invalid_argument(fmt::format("a placement key needs 1..{} target weights, not {}", kMaxParts, parts));
  }
  if (partition.part.size() != static_cast<std::size_t>(key.vertices)) {
    return invalid_argument(
        fmt::format("a partition of {} vertices does not fit a key for {} vertices", partition.part.size(), key.vertices));
  }
  for (std::size_t v = 0; v < partition.part.size(); ++v) {
    const int32_t p = partition.part[v];
    if (p < 0 || static_cast<std::size_t>(p) >= parts) {
      return invalid_argument(fmt::format("vertex {} is in part {}, outside 0..{}", v, p, parts - 1));
    }
  }
  const std::string note = partition.note.substr(0, kMaxNoteBytes);

  Writer out;
  out.put_bytes(kMagic, sizeof(kMagic));
  out.put(kVersion);
  out.put(static_cast<uint32_t>(parts));
  out.put(key.graph_hash);
  out.put(key.vertices);
  out.put(key.edges);
  out.put(static_cast<uint32_t>(key.method));
  out.put(static_cast<uint32_t>(key.objective));
  out.put(key.seed);
  out.put(key.imbalance);
  out.put(static_cast<uint32_t>(note.size()));
  out.put(uint32_t{0});
  for (double w : key.target_weights) out.put(w);
  out.put_bytes(note.data(), note.size());
  out.put_bytes(partition.part.data(), partition.part.size() * sizeof(int32_t));
  out.put(XXH3_64bits(out.data().data(), out.data().size()));

  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return io_error(fmt::format("cannot create the placement cache {}: {}", dir.string(), error.message()));
  const std::filesystem::path target = dir / placement_file_name(key);
  // Unique per process and call, so concurrent stores never write into one temporary file.
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path temporary =
      dir / fmt::format(".{}.tmp.{}.{}", target.filename().string(), ::getpid(), counter.fetch_add(1));
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(fmt::format("cannot create {}: {}", temporary.string(), errno_text(errno)));
  const std::vector<char>& bytes = out.data();
  std::size_t written = 0;
  int write_error = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      write_error = errno;
      break;
    }
    written += static_cast<std::size_t>(n);
  }
  // fsync before the rename: otherwise a crash can leave the new name pointing at an empty file.
  if (write_error == 0 && ::fsync(fd) != 0) write_error = errno;
  if (::close(fd) != 0 && write_error == 0) write_error = errno;
  if (write_error == 0 && ::rename(temporary.c_str(), target.c_str()) != 0) write_error = errno;
  if (write_error != 0) {
    ::unlink(temporary.c_str());
    return io_error(fmt::format("cannot write the cached placement {}: {}", target.string(), errno_text(write_error)));
  }
  return Status::ok();
}

Result<std::optional<Partition>> load_placement(const std::filesystem::path& dir, const PlacementKey& key,
                                                const graphdata::Graph& graph, std::string* reason) {
  if (key.vertices != graph.vertex_count() || key.edges != graph.edge_count()) {
    return invalid_argument(fmt::format("the placement key is for {} vertices and {} edges, the graph has {}",
                                        key.vertices, key.edges, describe(graph)));
  }
  const std::size_t parts = key.target_weights.size();
  if (parts == 0 || parts > kMaxParts) {
    return invalid_argument(fmt::format("a placement key needs 1..{} target weights, not {}", kMaxParts, parts));
  }
  const std::filesystem::path path = dir / placement_file_name(key);
  auto miss = [&](std::string why) -> Result<std::optional<Partition>> {
    if (reason != nullptr) *reason = fmt::format("{}: {}", path.string(), why);
    return std::optional<Partition>{};
  };

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    return miss(error == ENOENT ? std::string("no cached placement") : "unreadable: " + errno_text(error));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  auto read_exactly = [&](char* into, std::size_t size) -> bool {
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = ::read(fd, into + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<std::size_t>(n);
    }
    return true;
  };
  struct stat info {};
  if (::fstat(fd, &info) != 0) return miss("cannot stat: " + errno_text(errno));
  if (!S_ISREG(info.st_mode)) return miss("not a regular file");
  const auto file_size = static_cast<uint64_t>(info.st_size);
  if (file_size < kHeaderBytes + kChecksumBytes) {
    return miss(fmt::format("truncated: {} bytes, shorter than the {}-byte header", file_size, kHeaderBytes));
  }

  // The fixed header first: its counts decide how much to read, and are checked against the key
  // and the graph before anything is allocated from them.
  std::vector<char> header(kHeaderBytes);
  if (!read_exactly(header.data(), header.size())) return miss("truncated while reading the header");
  Reader in(header.data(), header.size());
  char magic[sizeof(kMagic)];
  std::memcpy(magic, in.here(), sizeof(magic));
  in.skip(sizeof(magic));
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) return miss("not a Tessera placement file (bad magic)");
  const auto version = in.get<uint32_t>();
  if (version != kVersion) return miss(fmt::format("format version {}, this build reads {}", version, kVersion));
  PlacementKey stored;
  const auto stored_parts = in.get<uint32_t>();
  stored.graph_hash = in.get<uint64_t>();
  stored.vertices = in.get<int64_t>();
  stored.edges = in.get<int64_t>();
  const auto method = in.get<uint32_t>();
  const auto objective = in.get<uint32_t>();
  stored.seed = in.get<uint64_t>();
  stored.imbalance = in.get<double>();
  const auto note_bytes = in.get<uint32_t>();
  if (stored.vertices != key.vertices) {
    return miss(fmt::format("stored for {} vertices, the graph has {}", stored.vertices, key.vertices));
  }
  if (stored.edges != key.edges) return miss(fmt::format("stored for {} edges, the graph has {}", stored.edges, key.edges));
  if (stored_parts != parts) return miss(fmt::format("stored for {} parts, not {}", stored_parts, parts));
  if (note_bytes > kMaxNoteBytes) return miss(fmt::format("note of {} bytes, above {}", note_bytes, kMaxNoteBytes));
  const uint64_t expected = kHeaderBytes + 8 * uint64_t{parts} + note_bytes +
                            4 * static_cast<uint64_t>(key.vertices) + kChecksumBytes;
  if (file_size != expected) {
    return miss(fmt::format("{} bytes where this key needs {} ({})", file_size, expected,
                            file_size < expected ? "truncated" : "trailing bytes"));
  }

  std::vector<char> all(static_cast<std::size_t>(expected));
  std::memcpy(all.data(), header.data(), header.size());
  if (!read_exactly(all.data() + kHeaderBytes, all.size() - kHeaderBytes)) return miss("truncated while reading");
  uint64_t checksum = 0;
  std::memcpy(&checksum, all.data() + all.size() - kChecksumBytes, sizeof(checksum));
  if (checksum != XXH3_64bits(all.data(), all.size() - kChecksumBytes)) return miss("checksum mismatch (corrupt file)");

  if (method > static_cast<uint32_t>(PartitionMethod::kFennel)) return miss(fmt::format("unknown method {}", method));
  if (objective > static_cast<uint32_t>(Objective::kVolume)) return miss(fmt::format("unknown objective {}", objective));
  stored.method = static_cast<PartitionMethod>(method);
  stored.objective = static_cast<Objective>(objective);
  Reader body(all.data() + kHeaderBytes, all.size() - kHeaderBytes);
  stored.target_weights.resize(parts);
  for (double& w : stored.target_weights) w = body.get<double>();
  std::string differs;
  if (!same_placement(stored, key, &differs)) return miss("stored for another placement: " + differs);

  Partition partition;
  partition.note.assign(body.here(), note_bytes);
  body.skip(note_bytes);
  partition.part.resize(static_cast<std::size_t>(key.vertices));
  std::memcpy(partition.part.data(), body.here(), partition.part.size() * sizeof(int32_t));
  std::vector<int64_t> counts(parts, 0);
  for (std::size_t v = 0; v < partition.part.size(); ++v) {
    const int32_t p = partition.part[v];
    if (p < 0 || static_cast<std::size_t>(p) >= parts) {
      return miss(fmt::format("vertex {} is in part {}, outside 0..{}", v, p, parts - 1));
    }
    ++counts[static_cast<std::size_t>(p)];
  }
  for (std::size_t p = 0; p < parts; ++p) {
    if (key.target_weights[p] == 0 && counts[p] > 0) {
      return miss(fmt::format("part {} has target 0 but holds {} vertices", p, counts[p]));
    }
  }
  Result<PartitionQuality> quality = evaluate_partition(graph, partition.part, key.target_weights);
  if (!quality) return miss("invalid partition: " + quality.status().message());
  partition.quality = std::move(*quality);
  if (reason != nullptr) reason->clear();
  return std::optional<Partition>(std::move(partition));
}

}  // namespace tessera::partition
