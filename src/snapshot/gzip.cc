// Gunzip: streaming zlib inflate of a (possibly multi-member) gzip file, with an output cap.
#include <zlib.h>

#include <algorithm>
#include <string>

#include "memtune/snapshot/snapshot.h"

namespace memtune::snapshot {
namespace {

constexpr int kGzipWindowBits = 15 + 16;         // 32 KiB window, gzip header (zlib manual)
constexpr std::size_t kChunkBytes = 256 * 1024;  // output grows by this much per step

}  // namespace

bool IsGzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

Result<std::string> Gunzip(std::string_view bytes, std::int64_t max_output_bytes) {
  z_stream zs{};
  if (inflateInit2(&zs, kGzipWindowBits) != Z_OK) {
    return Error{ErrorCode::kInternal, "", "zlib inflateInit2 failed", ""};
  }
  std::string out;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(std::min<std::size_t>(bytes.size(), UINT32_MAX));
  std::size_t fed = zs.avail_in;
  int rc = Z_OK;
  while (true) {
    if (static_cast<std::int64_t>(out.size()) >= max_output_bytes) {
      inflateEnd(&zs);
      return InvalidInput("",
                          "gzip data expands beyond " + std::to_string(max_output_bytes) + " bytes",
                          "raise the limit with --max-snapshot-size if the snapshot is real");
    }
    const std::size_t room =
        std::min<std::size_t>(kChunkBytes, static_cast<std::size_t>(max_output_bytes) - out.size());
    const std::size_t old = out.size();
    out.resize(old + room);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + old);
    zs.avail_out = static_cast<uInt>(room);
    const uInt in_before = zs.avail_in;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.resize(old + room - zs.avail_out);
    const bool progressed = zs.avail_in != in_before || out.size() != old;
    if (zs.avail_in == 0 && fed < bytes.size()) {  // feed inputs larger than 4 GiB
      const std::size_t more = std::min<std::size_t>(bytes.size() - fed, UINT32_MAX);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + fed));
      zs.avail_in = static_cast<uInt>(more);
      fed += more;
    }
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      if (!IsGzip(std::string_view(reinterpret_cast<const char*>(zs.next_in), zs.avail_in))) {
        break;  // trailing bytes after the last member are ignored, as gzip(1) does
      }
      inflateReset(&zs);  // next member
      continue;
    }
    if (rc == Z_BUF_ERROR && (zs.avail_in == 0 || !progressed)) {
      inflateEnd(&zs);
      return InvalidInput("", "truncated gzip data");
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      const std::string reason = zs.msg != nullptr ? zs.msg : "error " + std::to_string(rc);
      inflateEnd(&zs);
      return InvalidInput("", "corrupt gzip data: " + reason);
    }
  }
  inflateEnd(&zs);
  return out;
}

}  // namespace memtune::snapshot
