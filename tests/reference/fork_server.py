"""Run many measured cases in one Python process without letting them see each other.

Importing torch and transformers takes most of a tiny case's time on 2 cores. A server
imports them once, then runs each case in a child forked from itself, so every case
starts as a fresh process would: nothing an earlier case made is alive (the CPU meter's
scan of live tensors would count it), and no patch a case applies outlives it.

    server side:  serve(measure, preload)   one JSON payload per stdin line
    client side:  ForkServer(cmd, env).run(payload) -> (result dict, lines printed before it)
"""
import ctypes
import importlib
import json
import os
import subprocess
import sys
import tempfile

_RESULT = "RESULT "
# transformers imports its submodules lazily: these are what every case loads first.
TRANSFORMERS = ("transformers", "transformers.modeling_utils",
                "transformers.models.auto.modeling_auto")


def serve(measure, preload=TRANSFORMERS):
    """Imports `preload`, then answers each stdin line (a JSON payload) with a RESULT line
    holding measure(payload), computed in a forked child; whatever the child prints
    before it goes out first."""
    for module in preload:
        importlib.import_module(module)
    libc = ctypes.CDLL(None)
    for line in sys.stdin:
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                result = measure(json.loads(line))
            except BaseException as e:  # noqa: BLE001 - reported to the client
                result, code = {"error": f"{type(e).__name__}: {e}"}, 1
            libc.fflush(None)  # C stdio (oneDNN's verbose lines) before the result
            print(_RESULT + json.dumps(result), flush=True)
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        if not os.WIFEXITED(status):
            print(_RESULT + json.dumps({"error": f"the case's process ended ({status})"}),
                  flush=True)


class ForkServer:
    """The client: starts `command` (a serve() loop) on first use and sends it payloads."""

    def __init__(self, command, env):
        self.command, self.env = command, env
        self.proc = None
        self.stderr = tempfile.TemporaryFile(mode="w+")

    def run(self, payload):
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(self.command, env=self.env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.proc.stdin.write(json.dumps(payload) + "\n")
        self.proc.stdin.flush()
        lines = []
        for line in self.proc.stdout:
            if line.startswith(_RESULT):
                result = json.loads(line[len(_RESULT):])
                if "error" in result:
                    raise RuntimeError(result["error"])
                return result, lines
            lines.append(line)
        self.stderr.seek(0)
        raise RuntimeError(f"the case server exited:\n{self.stderr.read()[-3000:]}")

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()
