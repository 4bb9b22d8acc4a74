#include "tessera/core/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace tessera {

namespace {

std::string quoted(const std::string& path) { return "'" + path + "'"; }

// Closes on every path out of a function.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

}  // namespace

std::string describe_file_type(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO (named pipe)";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a regular file";
  }
}

Result<int> open_regular_file(const std::string& path, std::string_view what) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
  Descriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) {
    const int error = errno;
    std::string message = "cannot open " + std::string(what) + " " + quoted(path) + ": " + std::strerror(error);
    return io_error(error == ENOENT ? message + "; check the path" : message);
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    return io_error(std::string(what) + " " + quoted(path) + ": cannot stat: " + std::strerror(errno));
  }
  if (!S_ISREG(info.st_mode)) {
    return invalid_argument(std::string(what) + " " + quoted(path) + " is " + describe_file_type(info.st_mode) +
                            ", not a regular file; give the path of a " + std::string(what));
  }
  // Regular files never block; clearing the flag keeps later reads ordinary.
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0) ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return fd.release();
}

Result<uint64_t> regular_file_size(const std::string& path, std::string_view what) {
  Result<int> opened = open_regular_file(path, what);
  if (!opened) return opened.status();
  const Descriptor fd(*opened);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    return io_error(std::string(what) + " " + quoted(path) + ": cannot stat: " + std::strerror(errno));
  }
  return static_cast<uint64_t>(info.st_size);
}

Result<std::string> read_regular_file(const std::string& path, uint64_t max_bytes, std::string_view what) {
  Result<int> opened = open_regular_file(path, what);
  if (!opened) return opened.status();
  const Descriptor fd(*opened);
  std::string text;
  std::vector<char> buffer(64 * 1024);
  while (text.size() <= max_bytes) {
    const ssize_t got = ::read(fd.get(), buffer.data(), buffer.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      return io_error(std::string("cannot read ") + std::string(what) + " " + quoted(path) + ": " + std::strerror(errno));
    }
    if (got == 0) break;
    text.append(buffer.data(), static_cast<std::size_t>(got));
  }
  if (text.size() > max_bytes) {
    const std::string limit = max_bytes >= 4096 && max_bytes % 1024 == 0 ? std::to_string(max_bytes / 1024) + " KiB"
                                                                         : std::to_string(max_bytes) + " bytes";
    return resource_exhausted(std::string(what) + " " + quoted(path) + " is larger than " + limit + ", the most a " +
                              std::string(what) + " may be; is it the right file?");
  }
  return text;
}

}  // namespace tessera
