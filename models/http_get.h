// One bounded HTTP(S) GET, with libcurl: redirects followed, connect and total timeouts,
// a cap on the body. What fetches a config.json from the Hugging Face Hub
// (models/hub_config.h) stands on; it knows nothing of the Hub.
#pragma once

#include "models/layer.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace headroom {

struct HttpGetOptions {
  std::vector<std::string> headers;  // extra request headers, "Name: value"
  int connect_timeout_s = 10;
  int total_timeout_s = 30;  // the whole transfer, redirects included
  int64_t max_body_bytes = int64_t{4} << 20;
  int max_redirects = 10;
};

// The final response (after redirects), whatever its status.
struct HttpResponse {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names lower-cased; the last of a repeated name

  // The header's value, or "" when absent; `lower_name` is lower case.
  std::string Header(const std::string& lower_name) const;
};

// Why no response came.
enum class HttpFailure {
  kUnreachable,     // the name did not resolve, or nothing accepted the connection
  kTimedOut,        // connect_timeout_s or total_timeout_s passed
  kTooLarge,        // the body passed max_body_bytes; the transfer was stopped there
  kHeaderTooLarge,  // a header line past libcurl's limit (CURL_MAX_HTTP_HEADER, 100 KiB)
  kOther,           // TLS, too many redirects, a broken connection, ...
};
struct HttpError {
  HttpFailure kind;
  std::string detail;  // libcurl's words for it, one line
};

// Only http:// and https:// URLs, on the first request and on every redirect.
std::variant<HttpResponse, HttpError> HttpGet(const std::string& url,
                                              const HttpGetOptions& options = {});

}  // namespace headroom
