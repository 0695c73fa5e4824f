#pragma once
// Helpers shared by the io/ readers and writers: whole-file reads, atomic writes, and file text
// made fit for a one-line error message. Internal to the library (io/, and the loaders of nn/,
// optim/ and data/ that name a file's entries); not part of tapegrad's API.

#include <cstddef>
#include <string>
#include <string_view>

namespace tg::detail {

/// The message of errno value `err` ("No such file or directory").
std::string errno_text(int err);

/// Text from a file, safe for a one-line message: control and non-ASCII bytes as \xNN, text past
/// `max_shown` bytes cut to "...".
std::string printable(std::string_view s, std::size_t max_shown = 60);

/// The whole file's bytes; throws IoError "PATH: cannot open: ..." (or cannot read).
std::string read_file(const std::string& path);

// A temporary file beside `target`, renamed over it by commit(); removed if never committed, so
// a failure (or an exception between the writes) never leaves a partial or half-replaced file.
class TempFile {
 public:
  /// Throws IoError naming `target` when the folder refuses a new file.
  explicit TempFile(const std::string& target);
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile();

  /// Throws IoError naming the target (disk full, I/O error).
  void write(const void* data, std::size_t size);
  /// fsyncs, then renames over the target; throws IoError naming the target.
  void commit();

 private:
  std::string target_;
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace tg::detail
