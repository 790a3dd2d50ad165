#include "resp_writer.h"

#include "absl/strings/str_cat.h"

namespace bigset::server {

void RespWriter::Header(char type, int64_t n) {
  out_->push_back(type);
  absl::StrAppend(out_, n, "\r\n");
}

void RespWriter::Simple(std::string_view text) {
  out_->push_back('+');
  out_->append(text);
  out_->append("\r\n");
}

void RespWriter::Error(std::string_view text) {
  out_->push_back('-');
  for (char c : text) out_->push_back(c == '\r' || c == '\n' ? ' ' : c);
  out_->append("\r\n");
}

void RespWriter::Integer(int64_t value) { Header(':', value); }

void RespWriter::Bulk(std::string_view bytes) {
  Header('$', static_cast<int64_t>(bytes.size()));
  out_->append(bytes);
  out_->append("\r\n");
}

void RespWriter::Null() { out_->append(protocol_ == 3 ? "_\r\n" : "$-1\r\n"); }

void RespWriter::Bool(bool value) {
  if (protocol_ == 3) {
    out_->append(value ? "#t\r\n" : "#f\r\n");
  } else {
    Integer(value ? 1 : 0);
  }
}

void RespWriter::Array(size_t n) { Header('*', static_cast<int64_t>(n)); }

void RespWriter::Set(size_t n) {
  Header(protocol_ == 3 ? '~' : '*', static_cast<int64_t>(n));
}

void RespWriter::Map(size_t pairs) {
  if (protocol_ == 3) {
    Header('%', static_cast<int64_t>(pairs));
  } else {
    Header('*', static_cast<int64_t>(pairs * 2));
  }
}

}  // namespace bigset::server
