#!/usr/bin/env python3
"""A stand-in for the Hugging Face Hub's file endpoint, for the tests of `--model ORG/NAME`.

Serves GET and HEAD /ORG/NAME/resolve/main/config.json the way huggingface.co does:
200 with X-Repo-Commit and ETag (and X-Linked-Etag, as huggingface_hub reads it), 401
(X-Error-Code: GatedRepo) for a gated repository asked without a token and 403 with the
wrong one, 404 (X-Error-Code: RepoNotFound) for an unknown id, a relative 307 for a
renamed repository, and a body past any config's size for `test-org/huge`; and answers
no Hub gives: JSON that is not a model (`test-org/not-a-model`), a header line past
libcurl's 100 KiB (`test-org/big-header`), and an answer after 40 s (`test-org/slow`). Binds a free
port and writes it to --port-file; logs one line per request to --log (the path and
whether an Authorization header came).

    hub_server.py --config FILE --port-file FILE --log FILE [--token TOKEN]
"""
import argparse
import hashlib
import http.server
import os
import sys
import time

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True, help="the config.json every model serves")
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--token", default="hf_test_token", help="the token the gated repo takes")
    args = parser.parse_args()
    with open(args.config, "rb") as f:
        config = f.read()
    etag = hashlib.sha1(b"blob %d\0" % len(config) + config).hexdigest()  # git's blob id

    class Hub(http.server.BaseHTTPRequestHandler):
        def log_message(self, fmt, *a):  # one line per request to --log, not stderr
            with open(args.log, "a") as log:
                auth = self.headers.get("Authorization")
                log.write(f"{self.command} {self.path} auth={'none' if auth is None else auth}\n")

        def reply(self, status, body=b"", headers=()):
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command == "GET":
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # headroom stops reading a body past its limit

        def error(self, status, code, message):
            self.reply(status, message.encode(),
                       [("X-Error-Code", code), ("X-Error-Message", message)])

        def ok(self, body, versioned=True):
            headers = [("Content-Type", "application/json")]
            if versioned:
                headers += [("X-Repo-Commit", COMMIT), ("ETag", f'"{etag}"'),
                            ("X-Linked-Etag", f'"{etag}"')]
            self.reply(200, body, headers)

        def do_GET(self):
            parts = self.path.split("/")
            if len(parts) != 6 or parts[3:5] != ["resolve", "main"] or parts[5] != "config.json":
                return self.error(404, "EntryNotFound", "Entry not found")
            repo = f"{parts[1]}/{parts[2]}"
            auth = self.headers.get("Authorization")
            if repo in ("test-org/llama-like-8b", "test-org/planted"):
                return self.ok(config)
            if repo == "test-org/not-a-model":
                return self.ok(b'{"hello": "world"}')
            if repo == "test-org/big-header":
                return self.reply(200, config, [("X-Padding", "x" * (200 << 10))])
            if repo == "test-org/slow":
                time.sleep(40)  # past the 30 s default, so no setting hides it
                return self.ok(config)
            if repo == "test-org/unversioned":  # no commit, no ETag: a plain file server
                return self.ok(config, versioned=False)
            if repo == "test-org/renamed-llama":  # the Hub redirects a renamed repository
                return self.reply(307, b"", [("Location",
                                              "/test-org/llama-like-8b/resolve/main/config.json")])
            if repo == "test-org/huge":
                return self.ok(b" " * (5 << 20) + config)
            if repo == "test-org/gated-llama":
                if auth is None:
                    return self.error(401, "GatedRepo", "Access to model test-org/gated-llama is "
                                      "restricted. You must have access to it and be authenticated.")
                if auth != f"Bearer {args.token}":
                    return self.error(403, "GatedRepo", "Access to model test-org/gated-llama is "
                                      "restricted and you are not in the authorized list.")
                return self.ok(config)
            return self.error(404, "RepoNotFound", "Repository not found")

        do_HEAD = do_GET

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(args.port_file + ".tmp", args.port_file)  # the driver never reads half a port
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
