#include <tapegrad/data/tokenizer.h>

#include <cstdio>
#include <set>
#include <utility>

#include <tapegrad/autograd/error.h>

namespace tg::data {

namespace {

// The code point at text[pos], moving pos past it; -1 (pos unmoved) when the bytes there are
// not UTF-8 (a stray continuation byte, a truncated or overlong sequence, a surrogate).
int64_t next_code_point(std::string_view text, std::size_t& pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char b0 = byte(pos);
  int len;
  char32_t c;
  if (b0 < 0x80) {
    ++pos;
    return b0;
  } else if (b0 >= 0xc2 && b0 < 0xe0) {
    len = 2, c = b0 & 0x1f;
  } else if (b0 >= 0xe0 && b0 < 0xf0) {
    len = 3, c = b0 & 0x0f;
  } else if (b0 >= 0xf0 && b0 < 0xf5) {
    len = 4, c = b0 & 0x07;
  } else {
    return -1;
  }
  if (pos + len > text.size()) return -1;
  for (int k = 1; k < len; ++k) {
    if ((byte(pos + k) & 0xc0) != 0x80) return -1;
    c = (c << 6) | (byte(pos + k) & 0x3f);
  }
  const bool overlong_or_surrogate = (len == 3 && (c < 0x800 || (c >= 0xd800 && c < 0xe000))) ||
                                     (len == 4 && (c < 0x10000 || c > 0x10ffff));
  if (overlong_or_surrogate) return -1;
  pos += len;
  return c;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

[[noreturn]] void not_utf8(const char* who, std::string_view text, std::size_t pos) {
  char hex[8];
  std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(text[pos]));
  throw ValueError(std::string(who) + ": the text is not valid UTF-8 at byte " +
                   std::to_string(pos) + " ('" + hex + "')");
}

}  // namespace

std::string quote_char(char32_t c) {
  switch (c) {
    case '\n': return "'\\n'";
    case '\t': return "'\\t'";
    case '\r': return "'\\r'";
    case '\'': return "'\\''";
    case '\\': return "'\\\\'";
    default: break;
  }
  char buf[16];
  if (c < 0x20 || c == 0x7f) {
    std::snprintf(buf, sizeof buf, "'\\x%02x'", static_cast<unsigned>(c));
    return buf;
  }
  std::string utf8;
  append_utf8(utf8, c);
  std::snprintf(buf, sizeof buf, " (U+%04X)", static_cast<unsigned>(c));
  return "'" + utf8 + "'" + (c < 0x80 ? "" : buf);
}

CharTokenizer::CharTokenizer(std::string_view vocab) : vocab_(vocab) {
  if (vocab.empty()) throw ValueError("CharTokenizer: the vocabulary is empty");
  id_of_ascii_.fill(-1);
  for (std::size_t pos = 0; pos < vocab.size();) {
    const std::size_t start = pos;
    const int64_t c = next_code_point(vocab, pos);
    if (c < 0) not_utf8("CharTokenizer", vocab, pos);
    const int64_t id = size();
    int64_t before = -1;
    if (c < 128) {
      before = id_of_ascii_[c];
      id_of_ascii_[c] = static_cast<int32_t>(id);
    } else {
      const auto [it, fresh] = id_of_other_.try_emplace(static_cast<char32_t>(c), id);
      if (!fresh) before = it->second;
    }
    if (before >= 0)
      throw ValueError("CharTokenizer: the vocabulary repeats the character " +
                       quote_char(static_cast<char32_t>(c)) + " (ids " + std::to_string(before) +
                       " and " + std::to_string(id) + ")");
    chars_.emplace_back(vocab.substr(start, pos - start));
  }
}

CharTokenizer CharTokenizer::from_text(std::string_view text) {
  if (text.empty()) throw ValueError("CharTokenizer::from_text: the text is empty");
  std::array<bool, 128> ascii{};
  std::set<char32_t> other;
  for (std::size_t pos = 0; pos < text.size();) {
    const int64_t c = next_code_point(text, pos);
    if (c < 0) not_utf8("CharTokenizer::from_text", text, pos);
    if (c < 128)
      ascii[c] = true;
    else
      other.insert(static_cast<char32_t>(c));
  }
  std::string vocab;  // in code point order
  for (int c = 0; c < 128; ++c)
    if (ascii[c]) vocab += static_cast<char>(c);
  for (const char32_t c : other) append_utf8(vocab, c);
  return CharTokenizer(vocab);
}

CharTokenizer CharTokenizer::from_vocab(std::string_view vocab) { return CharTokenizer(vocab); }

std::vector<int64_t> CharTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t start = pos;
    const int64_t c = next_code_point(text, pos);
    if (c < 0) not_utf8("CharTokenizer::encode", text, pos);
    int64_t id = -1;
    if (c < 128) {
      id = id_of_ascii_[c];
    } else if (const auto it = id_of_other_.find(static_cast<char32_t>(c)); it != id_of_other_.end()) {
      id = it->second;
    }
    if (id < 0)
      throw ValueError("CharTokenizer::encode: character " + quote_char(static_cast<char32_t>(c)) +
                       " at byte " + std::to_string(start) + " is not in the vocabulary (" +
                       std::to_string(size()) + " characters)");
    ids.push_back(id);
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  text.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= size())
      throw ValueError("CharTokenizer::decode: id " + std::to_string(ids[i]) + " at index " +
                       std::to_string(i) + " is outside the vocabulary [0, " +
                       std::to_string(size()) + ")");
    text += chars_[static_cast<std::size_t>(ids[i])];
  }
  return text;
}

}  // namespace tg::data
