#include "models/http_get.h"

#include <algorithm>
#include <cctype>
#include <memory>

#include <curl/curl.h>
#include <fmt/format.h>

namespace headroom {
namespace {

// What the callbacks fill while libcurl runs the transfer.
struct Transfer {
  HttpResponse response;
  int64_t max_body_bytes = 0;
  bool too_large = false;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const size_t n = size * count;
  if (static_cast<int64_t>(t.response.body.size() + n) > t.max_body_bytes) {
    t.too_large = true;
    return 0;  // anything but n stops the transfer with CURLE_WRITE_ERROR
  }
  t.response.body.append(data, n);
  return n;
}

std::string Trim(std::string_view s) {
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

// Called once per header line of every response, redirects included: a status line
// starts the next response, so only the final one's headers remain.
size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto& headers = static_cast<Transfer*>(user)->response.headers;
  const std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) {
    headers.clear();
  } else if (const size_t colon = line.find(':'); colon != std::string_view::npos) {
    std::string name = Trim(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    headers[name] = Trim(line.substr(colon + 1));
  }
  return size * count;
}

HttpFailure KindOf(CURLcode code, bool too_large) {
  if (too_large || code == CURLE_FILESIZE_EXCEEDED) return HttpFailure::kTooLarge;
  // libcurl before 8.6 reports a header line past CURL_MAX_HTTP_HEADER as out of memory
  // (its header buffer is a dynbuf capped at that size, http.c); with the body capped at
  // a few MiB, a real allocation failure is not what happened.
  if (code == CURLE_OUT_OF_MEMORY) return HttpFailure::kHeaderTooLarge;
#if LIBCURL_VERSION_NUM >= 0x080600
  if (code == CURLE_TOO_LARGE) return HttpFailure::kHeaderTooLarge;
#endif
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
      return HttpFailure::kUnreachable;
    case CURLE_OPERATION_TIMEDOUT:
      return HttpFailure::kTimedOut;
    default:
      return HttpFailure::kOther;
  }
}

void InitCurlOnce() {
  // Not thread-safe in old libcurl, so once, before any handle exists.
  static const bool done = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  (void)done;
}

}  // namespace

std::string HttpResponse::Header(const std::string& lower_name) const {
  const auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

std::variant<HttpResponse, HttpError> HttpGet(const std::string& url,
                                              const HttpGetOptions& options) {
  InitCurlOnce();
  const std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(),
                                                                 &curl_easy_cleanup);
  if (!curl) return HttpError{HttpFailure::kOther, "libcurl could not start a transfer"};
  curl_slist* list = nullptr;
  for (const std::string& h : options.headers) list = curl_slist_append(list, h.c_str());
  const std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(list,
                                                                            &curl_slist_free_all);
  Transfer t;
  t.max_body_bytes = options.max_body_bytes;
  char error_text[CURL_ERROR_SIZE] = {};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, static_cast<long>(options.max_redirects));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, static_cast<long>(options.connect_timeout_s));
  curl_easy_setopt(c, CURLOPT_TIMEOUT, static_cast<long>(options.total_timeout_s));
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(options.max_body_bytes));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // timeouts without SIGALRM
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_USERAGENT, "headroom/0.1.0");
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_text);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);

  const CURLcode code = curl_easy_perform(c);
  if (code != CURLE_OK) {
    const HttpFailure kind = KindOf(code, t.too_large);
    std::string detail = error_text[0] != '\0' ? error_text : curl_easy_strerror(code);
    if (kind == HttpFailure::kTooLarge)
      detail = fmt::format("the body is over {} bytes", options.max_body_bytes);
    if (kind == HttpFailure::kHeaderTooLarge)
      detail = fmt::format("a header line is over {} bytes", CURL_MAX_HTTP_HEADER);
    return HttpError{kind, Trim(detail)};
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  t.response.status = static_cast<int>(status);
  return std::move(t.response);
}

}  // namespace headroom
