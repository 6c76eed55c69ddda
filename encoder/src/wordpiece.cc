// WordPiece tokenizer. Normalisation runs code point by code point in the order of HF
// tokenizers' BertNormalizer (clean, CJK spacing, NFD + strip marks, lowercase) and feeds the
// pre-tokeniser directly, so no normalised copy of a huge prompt is ever built.
#include <fstream>
#include <stdexcept>

#include "tidegate/encoder/minilm.h"
#include "unicode_text.h"

namespace tidegate::encoder {

WordPieceTokenizer WordPieceTokenizer::from_vocab_file(const std::string& path, const Options& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("wordpiece: cannot read vocabulary file '" + path + "'");
  std::vector<std::string> vocab;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    vocab.push_back(line);
  }
  try {
    return WordPieceTokenizer(std::move(vocab), options);
  } catch (const std::exception& e) {
    throw std::runtime_error("wordpiece: '" + path + "': " + e.what());
  }
}

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> vocab, const Options& options)
    : vocab_(std::move(vocab)), options_(options) {
  ids_.reserve(vocab_.size());
  for (std::size_t i = 0; i < vocab_.size(); ++i) ids_.emplace(vocab_[i], static_cast<std::int32_t>(i));
  auto special = [&](std::string_view name) {
    auto id = id_of(name);
    if (!id) throw std::runtime_error("vocabulary lacks " + std::string(name));
    return *id;
  };
  cls_ = special("[CLS]");
  sep_ = special("[SEP]");
  pad_ = special("[PAD]");
  unk_ = special("[UNK]");
}

std::optional<std::int32_t> WordPieceTokenizer::id_of(std::string_view token) const {
  auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

void WordPieceTokenizer::for_each_word(std::string_view text,
                                       const std::function<bool(std::string_view, std::size_t)>& on_word) const {
  std::string word;
  std::size_t chars = 0;
  bool go_on = true;
  auto flush = [&] {
    if (chars > 0 && go_on) go_on = on_word(word, chars);
    word.clear();
    chars = 0;
  };
  // Pre-tokeniser: whitespace ends a word, punctuation is a word of its own.
  auto pre_tokenize = [&](char32_t c) {
    if (unicode::is_whitespace(c)) {
      flush();
    } else if (unicode::is_punctuation(c)) {
      flush();
      unicode::append_utf8(word, c);
      chars = 1;
      flush();
    } else {
      unicode::append_utf8(word, c);
      ++chars;
    }
  };
  auto lower = [&](char32_t c) {
    if (options_.lowercase) {
      unicode::to_lower(c, pre_tokenize);
    } else {
      pre_tokenize(c);
    }
  };
  auto strip = [&](char32_t c) {
    if (options_.strip_accents) {
      unicode::strip_accents(c, lower);
    } else {
      lower(c);
    }
  };
  std::size_t pos = 0;
  while (pos < text.size() && go_on) {
    char32_t c = unicode::next_code_point(text, pos);
    if (c == 0 || c == 0xFFFD || unicode::is_control(c)) continue;
    if (unicode::is_whitespace(c)) c = U' ';
    if (options_.split_cjk && unicode::is_cjk(c)) {
      strip(U' ');
      strip(c);
      strip(U' ');
    } else {
      strip(c);
    }
  }
  flush();
}

void WordPieceTokenizer::word_pieces(std::string_view word, std::size_t chars, std::vector<std::int32_t>& out) const {
  if (chars > options_.max_chars_per_word) {
    out.push_back(unk_);
    return;
  }
  const std::size_t first = out.size();
  std::string candidate;
  std::size_t start = 0;
  while (start < word.size()) {
    // Code point boundaries after `start`, longest first.
    std::size_t end = word.size();
    std::int32_t found = -1;
    while (end > start) {
      candidate.assign(start > 0 ? "##" : "");
      candidate.append(word.substr(start, end - start));
      if (auto it = ids_.find(candidate); it != ids_.end()) {
        found = it->second;
        break;
      }
      do {
        --end;
      } while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80);
    }
    if (found < 0) {
      out.resize(first);
      out.push_back(unk_);
      return;
    }
    out.push_back(found);
    start = end;
  }
}

std::vector<std::int32_t> WordPieceTokenizer::tokenize(std::string_view text, std::size_t max_pieces) const {
  std::vector<std::int32_t> out;
  if (max_pieces == 0) return out;
  for_each_word(text, [&](std::string_view word, std::size_t chars) {
    word_pieces(word, chars, out);
    return out.size() < max_pieces;
  });
  if (out.size() > max_pieces) out.resize(max_pieces);
  return out;
}

std::vector<std::int32_t> WordPieceTokenizer::encode(std::string_view text, std::size_t max_tokens) const {
  if (max_tokens < 2) throw std::invalid_argument("wordpiece: max_tokens must be at least 2");
  std::vector<std::int32_t> ids = tokenize(text, max_tokens - 2);
  ids.insert(ids.begin(), cls_);
  ids.push_back(sep_);
  return ids;
}

std::vector<std::string> WordPieceTokenizer::basic_tokens(std::string_view text) const {
  std::vector<std::string> words;
  for_each_word(text, [&](std::string_view word, std::size_t) {
    words.emplace_back(word);
    return true;
  });
  return words;
}

}  // namespace tidegate::encoder
