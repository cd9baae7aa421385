"""A minimal client for the hookhost daemon (`hookhost serve [--socket PATH]`).

Standard library only. The protocol is JSON lines: send
``{"id", "event", "input", "project"?}``, receive ``{"id", "outcome"}`` or
``{"id", "error"}``; ``{"id", "subscribe": SESSION}`` pushes
``{"session", "async"}`` messages as the session's async hooks finish.

    client = HookhostClient(default_socket_path())
    outcome = client.dispatch("PreToolUse", {"session_id": "s1", "tool_name": "Bash",
                                             "tool_input": {"command": "rm -rf /"}})
    if outcome["decision"] in ("deny", "block"):
        print("blocked:", outcome["reason"])

Run it as a script for a quick check: ``python3 hookhost_client.py [SOCKET]``.
"""

import itertools
import json
import os
import socket
import sys


def default_socket_path():
    """Where ``hookhost serve`` listens without ``--socket``: ``$XDG_RUNTIME_DIR`` when
    it is an absolute directory, else the data directory."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime) and os.path.isdir(runtime):
        return os.path.join(runtime, "hookhost.sock")
    data = os.environ.get("HOOKHOST_DATA_DIR") or os.path.join(
        os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "hookhost"
    )
    return os.path.join(data, "hookhost.sock")


class HookhostError(Exception):
    """The daemon could not serve a request."""


class HookhostClient:
    """One connection to the daemon. Not thread-safe: use one client per thread."""

    def __init__(self, socket_path, timeout=60.0):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        self._sock.connect(socket_path)
        self._file = self._sock.makefile("rwb")
        self._ids = itertools.count(1)
        self._pending = {}  # answers that arrived for other ids
        self.pushed = []  # async results pushed for subscribed sessions

    def close(self):
        self._file.close()
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _send(self, message):
        self._file.write(json.dumps(message).encode() + b"\n")
        self._file.flush()

    def _read(self):
        line = self._file.readline()
        if not line:
            raise HookhostError("the daemon closed the connection")
        return json.loads(line)

    def _wait(self, request_id):
        while request_id not in self._pending:
            message = self._read()
            if "session" in message and "async" in message:
                self.pushed.append(message)
            else:
                self._pending[message.get("id")] = message
        answer = self._pending.pop(request_id)
        if "error" in answer:
            raise HookhostError(answer["error"])
        return answer

    def dispatch(self, event, hook_input, project=None):
        """Dispatches one event and returns its outcome (a dict)."""
        request_id = next(self._ids)
        message = {"id": request_id, "event": event, "input": hook_input}
        if project is not None:
            message["project"] = project
        self._send(message)
        return self._wait(request_id)["outcome"]

    def subscribe(self, session):
        """Asks for the session's async results; they collect in ``self.pushed``."""
        request_id = next(self._ids)
        self._send({"id": request_id, "subscribe": session})
        self._wait(request_id)

    def next_push(self):
        """Blocks until the next pushed async result and returns it."""
        while not self.pushed:
            message = self._read()
            if "session" in message and "async" in message:
                self.pushed.append(message)
            else:
                self._pending[message.get("id")] = message
        return self.pushed.pop(0)


def main(argv):
    if len(argv) > 2:
        print("usage: hookhost_client.py [SOCKET]", file=sys.stderr)
        return 2
    with HookhostClient(argv[1] if len(argv) == 2 else default_socket_path()) as client:
        for command in ("ls -la", "rm -rf /"):
            outcome = client.dispatch(
                "PreToolUse",
                {"session_id": "py-client", "tool_name": "Bash", "tool_input": {"command": command}},
            )
            print(json.dumps({"command": command, "decision": outcome["decision"], "reason": outcome["reason"]}))
        try:
            client.dispatch("NoSuchEvent", {})
        except HookhostError as error:
            print(json.dumps({"error": str(error)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
