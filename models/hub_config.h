// `--model ORG/NAME`: a model named by its Hugging Face Hub id. Its config.json comes
// from huggingface_hub's cache (models/hub_cache.h) when it is there, and otherwise from
// the Hub over HTTPS (models/http_get.h), after which it is cached: a second run needs
// no network. The settings are huggingface_hub's environment variables.
#pragma once

#include "models/layer.h"

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "planner/core/result.h"

namespace headroom {

// "ORG/NAME" as the Hub spells a repository id (huggingface_hub's validate_repo_id):
// exactly one '/', each side 1-96 of [A-Za-z0-9._-], not starting or ending with '.' or
// '-', no "--" or "..", and no .json/.yaml/.yml ending (those are files).
bool IsHubModelId(std::string_view text);

struct HubSettings {
  std::string endpoint = "https://huggingface.co";  // HF_ENDPOINT, no trailing '/'
  std::string token;            // HF_TOKEN, else the file `hf auth login` wrote ($HF_TOKEN_PATH)
  std::string token_error;      // why that file could not be used (too large, unreadable)
  int download_timeout_s = 30;  // HF_HUB_DOWNLOAD_TIMEOUT: the whole transfer
  bool offline = false;         // HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is 1, ON, YES or TRUE
  // $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
  // ~/.cache/huggingface/hub (huggingface_hub/constants.py).
  std::filesystem::path cache_dir;

  // The endpoint as messages print it: a user and password in it become "***".
  std::string ShownEndpoint() const;
};
HubSettings HubSettingsFromEnvironment();

struct HubConfig {
  std::string text;    // the config.json
  std::string origin;  // where it came from (the cached file or the URL), for messages
};

// Whether a downloaded config.json is a model headroom can plan; only one that is gets
// cached, so a bad answer is asked for again next time rather than served from the cache.
using HubConfigCheck = std::function<std::optional<Error>(const HubConfig&)>;

// The config.json of `repo_id` at `main`: cached, else downloaded, checked and then cached
// (a cache that cannot be written is skipped). The error is one line that says which of
// offline, unreachable, timed out, gated or private, or unknown id it was, and how to pass
// a local config.json instead; or `check`'s error.
Result<HubConfig> FetchHubConfig(std::string_view repo_id, const HubSettings& settings,
                                 const HubConfigCheck& check);

}  // namespace headroom
