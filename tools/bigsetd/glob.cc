#include "glob.h"

#include <cstddef>

namespace bigset::server {
namespace {

// Matches one pattern item at pattern[*p] (not '*') against character c;
// advances *p past the item. False if the item does not match.
bool MatchOne(std::string_view pattern, size_t* p, unsigned char c) {
  const char item = pattern[*p];
  if (item == '?') {
    ++*p;
    return true;
  }
  if (item == '\\' && *p + 1 < pattern.size()) {
    const bool ok = static_cast<unsigned char>(pattern[*p + 1]) == c;
    *p += 2;
    return ok;
  }
  if (item == '[') {
    size_t i = *p + 1;
    bool negate = false;
    if (i < pattern.size() && pattern[i] == '^') {
      negate = true;
      ++i;
    }
    bool found = false;
    while (i < pattern.size() && pattern[i] != ']') {
      if (pattern[i] == '\\' && i + 1 < pattern.size()) {
        if (static_cast<unsigned char>(pattern[i + 1]) == c) found = true;
        i += 2;
      } else if (i + 2 < pattern.size() && pattern[i + 1] == '-' &&
                 pattern[i + 2] != ']') {
        unsigned char lo = pattern[i], hi = pattern[i + 2];
        if (lo > hi) std::swap(lo, hi);
        if (c >= lo && c <= hi) found = true;
        i += 3;
      } else {
        if (static_cast<unsigned char>(pattern[i]) == c) found = true;
        ++i;
      }
    }
    // An unclosed '[' runs to the end of the pattern, as in Redis.
    *p = i < pattern.size() ? i + 1 : i;
    return found != negate;
  }
  ++*p;
  return static_cast<unsigned char>(item) == c;
}

}  // namespace

bool GlobMatch(std::string_view pattern, std::string_view text) {
  // Greedy with one back-track point: the last star. Every earlier star's
  // extent is settled once a later star matched, so this is complete.
  size_t p = 0, t = 0;
  size_t star_p = std::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      while (p < pattern.size() && pattern[p] == '*') ++p;
      if (p == pattern.size()) return true;
      star_p = p;
      star_t = t;
      continue;
    }
    size_t next = p;
    if (p < pattern.size() &&
        MatchOne(pattern, &next, static_cast<unsigned char>(text[t]))) {
      p = next;
      ++t;
      continue;
    }
    if (star_p == std::string_view::npos) return false;
    p = star_p;
    t = ++star_t;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::string GlobLiteralPrefix(std::string_view pattern) {
  std::string prefix;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '*' || c == '?' || c == '[') break;
    if (c == '\\') {
      if (i + 1 >= pattern.size()) break;
      prefix.push_back(pattern[++i]);
      continue;
    }
    prefix.push_back(c);
  }
  return prefix;
}

ElementBounds PrefixBounds(std::string_view prefix) {
  ElementBounds bounds;
  if (prefix.empty()) return bounds;
  bounds.start = std::string(prefix);
  // The end: the prefix with its last byte that is not 0xff incremented
  // (and what follows dropped); none if every byte is 0xff.
  std::string end(prefix);
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) {
    end.pop_back();
  }
  if (!end.empty()) {
    end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
    bounds.end = std::move(end);
  }
  return bounds;
}

}  // namespace bigset::server
