#include "models/hub_config.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/http_get.h"
#include "models/hub_cache.h"
#include "planner/core/file_io.h"

namespace headroom {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kFilename = "config.json";
constexpr int64_t kMaxConfigBytes = int64_t{4} << 20;  // real configs are a few KiB
constexpr std::string_view kLocalHint =
    "pass a local config.json instead: --model path/to/config.json";

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

bool IsHubNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
}

bool IsHubNamePart(std::string_view part) {
  return !part.empty() && part.size() <= 96 &&
         std::all_of(part.begin(), part.end(), IsHubNameChar) && part.front() != '.' &&
         part.front() != '-' && part.back() != '.' && part.back() != '-' &&
         part.find("--") == std::string_view::npos && part.find("..") == std::string_view::npos;
}

// huggingface_hub's _is_true.
bool IsTrue(std::string value) {
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return value == "1" || value == "ON" || value == "YES" || value == "TRUE";
}

fs::path Home() {
  if (std::string home = Env("HOME"); !home.empty()) return home;
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_dir != nullptr)
    return pw->pw_dir;
  return ".";
}

// os.path.expanduser for a leading "~".
fs::path ExpandUser(const std::string& path) {
  if (path == "~") return Home();
  if (path.starts_with("~/")) return Home() / path.substr(2);
  return path;
}

std::string Trim(std::string s) {
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  s.erase(std::find_if_not(s.rbegin(), s.rend(), space).base(), s.end());
  s.erase(s.begin(), std::find_if_not(s.begin(), s.end(), space));
  return s;
}

// HF_TOKEN, else the token file; a file that is there but cannot be used is an error
// (set when a download needs it), not a silent anonymous request.
void TokenFromEnvironment(const fs::path& hf_home, HubSettings& s) {
  if (std::string token = Trim(Env("HF_TOKEN")); !token.empty()) {
    s.token = token;
    return;
  }
  const std::string path = Env("HF_TOKEN_PATH");
  const fs::path file = path.empty() ? hf_home / "token" : ExpandUser(path);
  std::error_code ec;
  if (!fs::exists(file, ec)) return;
  constexpr int64_t kMaxTokenFileBytes = 4096;  // a Hub token is 37 characters
  Result<std::string> text = ReadRegularFile(file, kMaxTokenFileBytes);
  if (text)
    s.token = Trim(*text);
  else
    s.token_error = fmt::format(
        "the Hugging Face token file: {}; put the token alone in it or set HF_TOKEN, or {}",
        text.error().message, kLocalHint);
}

// HF_HUB_DOWNLOAD_TIMEOUT as huggingface_hub reads it (seconds); unset or not a number
// within [1, 3600] keeps the default.
int DownloadTimeout(int fallback) {
  const std::string text = Env("HF_HUB_DOWNLOAD_TIMEOUT");
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(seconds >= 1 && seconds <= 3600)) return fallback;
  return static_cast<int>(std::ceil(seconds));
}

// "W/\"abc\"" -> "abc", as huggingface_hub's _normalize_etag.
std::string NormalizeEtag(std::string etag) {
  if (etag.starts_with("W/")) etag.erase(0, 2);
  std::erase(etag, '"');
  return etag;
}

Error TransportError(std::string_view id, const HubSettings& s, const HttpError& e) {
  const std::string endpoint = s.ShownEndpoint();
  switch (e.kind) {
    case HttpFailure::kUnreachable:
      return MakeError(fmt::format(
          "cannot download the config.json of '{}': no connection to {} ({}), and it is not in "
          "the Hugging Face cache {}; check the network or HF_ENDPOINT, or {}",
          id, endpoint, e.detail, s.cache_dir.string(), kLocalHint));
    case HttpFailure::kTimedOut:
      return MakeError(fmt::format(
          "cannot download the config.json of '{}': {} did not answer in time ({}; the limits are "
          "{} s to connect and {} s in all, HF_HUB_DOWNLOAD_TIMEOUT), and it is not in the "
          "Hugging Face cache {}; try again, or {}",
          id, endpoint, e.detail, HttpGetOptions{}.connect_timeout_s, s.download_timeout_s,
          s.cache_dir.string(), kLocalHint));
    case HttpFailure::kTooLarge:
      return MakeError(fmt::format(
          "the config.json of '{}' from {} is larger than {} bytes, more than any model config; {}",
          id, endpoint, kMaxConfigBytes, kLocalHint));
    case HttpFailure::kHeaderTooLarge:
      return MakeError(fmt::format(
          "cannot download the config.json of '{}': the answer from {} is not a Hub's ({}); "
          "check HF_ENDPOINT, or {}",
          id, endpoint, e.detail, kLocalHint));
    case HttpFailure::kOther:
      break;
  }
  return MakeError(fmt::format("cannot download the config.json of '{}' from {}: {}; {}", id,
                               endpoint, e.detail, kLocalHint));
}

// The Hub answers 401 to an anonymous request for a gated, a private or a missing
// repository alike (X-Error-Code tells them apart when it can), 403 to a token without
// access, and 404 to a missing repository or file.
Error StatusError(std::string_view id, const HubSettings& s, const HttpResponse& r) {
  const std::string code = r.Header("x-error-code");
  const std::string endpoint = s.ShownEndpoint();
  if (r.status == 401 || r.status == 403) {
    if (!s.token.empty())
      return MakeError(fmt::format(
          "the Hub refused HF_TOKEN for '{}' (HTTP {} from {}): a gated model needs its terms "
          "accepted at {}/{} by that account and a token that may read it, or {}",
          id, r.status, endpoint, endpoint, id, kLocalHint));
    if (code == "GatedRepo")
      return MakeError(fmt::format(
          "'{}' is a gated model (HTTP {} from {}) and HF_TOKEN is not set: accept its terms at "
          "{}/{} and set HF_TOKEN to a read token, or {}",
          id, r.status, endpoint, endpoint, id, kLocalHint));
    return MakeError(fmt::format(
        "'{}' is gated, private or not on the Hub (HTTP {} from {}) and HF_TOKEN is not set: "
        "check the id or set HF_TOKEN to a token that may read it, or {}",
        id, r.status, endpoint, kLocalHint));
  }
  if (r.status == 404 && code == "EntryNotFound")
    return MakeError(fmt::format("the model '{}' on {} has no config.json (HTTP 404); {}", id,
                                 endpoint, kLocalHint));
  if (r.status == 404)
    return MakeError(fmt::format(
        "no model '{}' on {} (HTTP 404), and no file of that name here: check the id (ORG/NAME "
        "as on its Hub page), or {}",
        id, endpoint, kLocalHint));
  return MakeError(fmt::format("cannot download the config.json of '{}': HTTP {} from {}; {}", id,
                               r.status, endpoint, kLocalHint));
}

}  // namespace

bool IsHubModelId(std::string_view text) {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos || text.find('/', slash + 1) != std::string_view::npos)
    return false;
  for (const std::string_view ext : {".json", ".yaml", ".yml"})
    if (text.ends_with(ext)) return false;
  return IsHubNamePart(text.substr(0, slash)) && IsHubNamePart(text.substr(slash + 1));
}

HubSettings HubSettingsFromEnvironment() {
  HubSettings s;
  if (std::string endpoint = Env("HF_ENDPOINT"); !endpoint.empty()) {
    while (endpoint.ends_with('/')) endpoint.pop_back();
    s.endpoint = endpoint;
  }
  s.offline = IsTrue(Env("HF_HUB_OFFLINE")) || IsTrue(Env("TRANSFORMERS_OFFLINE"));
  const std::string xdg = Env("XDG_CACHE_HOME");
  const std::string home = Env("HF_HOME");
  const fs::path hf_home = !home.empty()  ? ExpandUser(home)
                           : !xdg.empty() ? ExpandUser(xdg) / "huggingface"
                                          : Home() / ".cache" / "huggingface";
  std::string cache = Env("HF_HUB_CACHE");
  if (cache.empty()) cache = Env("HUGGINGFACE_HUB_CACHE");  // the older name
  s.cache_dir = !cache.empty() ? ExpandUser(cache) : hf_home / "hub";
  TokenFromEnvironment(hf_home, s);
  s.download_timeout_s = DownloadTimeout(s.download_timeout_s);
  return s;
}

std::string HubSettings::ShownEndpoint() const {
  const size_t scheme = endpoint.find("://");
  const size_t host = scheme == std::string::npos ? 0 : scheme + 3;
  const size_t at = endpoint.find('@', host);
  if (at == std::string::npos || endpoint.find('/', host) < at) return endpoint;
  return endpoint.substr(0, host) + "***" + endpoint.substr(at);
}

Result<HubConfig> FetchHubConfig(std::string_view repo_id, const HubSettings& settings,
                                 const HubConfigCheck& check) {
  // Step 1. The cache first: `main`'s config.json rarely changes, and a plan should
  // neither wait on the network nor need it.
  if (const std::optional<fs::path> cached =
          FindInHubCache(settings.cache_dir, repo_id, kFilename)) {
    Result<std::string> text = ReadRegularFile(*cached, kMaxConfigBytes);
    if (!text) return MakeError("--model: " + text.error().message);
    return HubConfig{*text, cached->string()};
  }
  if (settings.offline)
    return MakeError(fmt::format(
        "HF_HUB_OFFLINE is set and the config.json of '{}' is not in the Hugging Face cache {}: "
        "unset HF_HUB_OFFLINE to download it, or {}",
        repo_id, settings.cache_dir.string(), kLocalHint));

  // Step 2. The Hub, which redirects renamed repositories and large files elsewhere.
  const std::string url =
      fmt::format("{}/{}/resolve/main/{}", settings.endpoint, repo_id, kFilename);
  HttpGetOptions options;
  options.max_body_bytes = kMaxConfigBytes;
  options.total_timeout_s = settings.download_timeout_s;
  if (!settings.token_error.empty()) return MakeError(settings.token_error);
  if (!settings.token.empty()) {
    const bool printable = std::all_of(settings.token.begin(), settings.token.end(),
                                       [](unsigned char c) { return std::isgraph(c) != 0; });
    if (!printable)
      return MakeError("HF_TOKEN holds a space or a control character; set it to the token alone");
    options.headers.push_back("Authorization: Bearer " + settings.token);
  }
  const std::variant<HttpResponse, HttpError> got = HttpGet(url, options);
  if (const auto* error = std::get_if<HttpError>(&got))
    return TransportError(repo_id, settings, *error);
  const HttpResponse& response = std::get<HttpResponse>(got);
  if (response.status != 200) return StatusError(repo_id, settings, response);
  const std::string shown_url =
      fmt::format("{}/{}/resolve/main/{}", settings.ShownEndpoint(), repo_id, kFilename);
  if (!nlohmann::json::accept(response.body))
    return MakeError(
        fmt::format("{} answered with something that is not JSON; {}", shown_url, kLocalHint));
  HubConfig config{response.body, shown_url};
  if (auto error = check(config)) return *error;

  // Step 3. Into the cache, for the next run: only what parsed as a model.
  const std::string linked_etag = response.Header("x-linked-etag");
  const HubFileVersion version{
      .commit = response.Header("x-repo-commit"),
      .etag = NormalizeEtag(!linked_etag.empty() ? linked_etag : response.Header("etag"))};
  (void)StoreInHubCache(settings.cache_dir, repo_id, kFilename, response.body, version);
  return config;
}

}  // namespace headroom
